"""A local stand-in for the Hugging Face Hub, for tests: stdlib only, 127.0.0.1, repos on disk.

It speaks the HTTP protocol that `huggingface_hub` and `datasets` use for `push_to_hub` and
`load_dataset` (the requests `huggingface_hub`'s `HfApi` and `HfFileSystem` make: `hf_api.py` and
`hf_file_system.py` in its source), enforces tokens and privacy like the Hub, and can
fail chosen requests on purpose. Start it with `python tests/hub_server --port 0 --port-file F
--token SECRET:alice --log requests.jsonl`; the clients must see `HF_ENDPOINT=http://127.0.0.1:PORT`
and `HF_HUB_DISABLE_XET=1` before they are imported.

Modules: `cli` (arguments, startup), `app` (HTTP layer, faults, request log), `routes` (the table),
`repo_routes` / `content_routes` / `file_routes` (handlers), `store` (repos and objects on disk),
`auth` (tokens, who may read or write), `faults`, `requestlog`, `control` (`/_local/faults`).
"""
