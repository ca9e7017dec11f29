"""The audit and show-mask on a row holding one huge tool output, against the same file without it.

A JSONL file of ordinary rows (``benchmarks/_unique_rows.py``), and the same file with one more row whose
tool output is ``--chars`` characters of log-like text (words and numbers, ASCII). Each case runs in a
fresh process: ``whileai_datasets.audit(path, tokenizer=tok, max_length=...)`` then show-mask's view of the
huge row (``tokenize.views.table_views``), with wall and CPU seconds and the process's peak RSS. The
tokenizer is the benchmark one (byte-level BPE trained on rows of the same kind) with trl's
``qwen2_5_training`` template. A bounded cost is the huge case within the same order as the ordinary one:

    python benchmarks/bench_huge_value.py --rows 200 --chars 5000000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._unique_rows import corpus, unique_row  # noqa: E402
from tests.support.tiny_lm import train_tokenizer, trl_template  # noqa: E402


def huge_row(chars: int) -> dict[str, Any]:
    """A tool call whose output is ``chars`` characters of log lines."""
    rng = random.Random(3)
    lines, size = [], 0
    while size < chars:
        line = f"{rng.randrange(10**6):06d} worker-{rng.randrange(64)} status={rng.choice(['ok', 'retry', 'fail'])}" \
               f" took {rng.random() * 100:.3f} ms\n"
        lines.append(line)
        size += len(line)
    call = {"id": "call_1", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}
    return {"messages": [{"role": "system", "content": "You read logs."},
                         {"role": "user", "content": "what failed?"},
                         {"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "call_1", "content": "".join(lines)[:chars]},
                         {"role": "assistant", "content": "worker 3 failed twice."}]}


def child(path: str, max_length: int) -> dict[str, Any]:
    import datasets

    import whileai_datasets
    from whileai_datasets.tokenize.token_masks import tokenize
    from whileai_datasets.tokenize.views import table_views

    tok = train_tokenizer(corpus(), chat_template=trl_template("qwen2_5_training"))
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    found = whileai_datasets.audit(path, tokenizer=tok, max_length=max_length)
    audit_wall = time.perf_counter() - start
    ds = datasets.load_dataset("whileai/export", data_files=path, split="train", cache_dir=path + ".cache")
    last = ds.data.table.slice(ds.num_rows - 1, 1)
    start = time.perf_counter()
    view, = table_views(tokenize(tok, max_length=max_length), last, max_length)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"audit_s": round(audit_wall, 2), "show_mask_s": round(time.perf_counter() - start, 2),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "peak_rss_mb": after.ru_maxrss // 1024, "supervised_tokens": found.supervised_tokens,
            "tokens_before_cut": found.tokens_before_cut, "last_row_supervised": view.supervised}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200, help="ordinary rows in both files")
    parser.add_argument("--chars", type=int, default=5_000_000, help="characters of the huge tool output")
    parser.add_argument("--max-length", type=int, default=4096)
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.max_length)))
        return
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        ordinary = [unique_row(i) for i in range(args.rows)]
        for name, rows in (("ordinary", ordinary + [unique_row(args.rows)]),
                           ("huge", ordinary + [huge_row(args.chars)])):
            path = Path(tmp) / f"{name}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            out = subprocess.run([sys.executable, __file__, "--child", str(path), "--max-length", str(args.max_length)],
                                 capture_output=True, text=True, check=True)
            report[name] = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
