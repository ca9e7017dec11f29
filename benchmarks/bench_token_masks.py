"""Token masks, three ways side by side: tokenize, apply_chat_template with masks, prefix-diff.

Conversations with 2, 8 and 32 assistant turns (user asks, tool calls and
results, answers), the same trained fast tokenizer and one template (default
trl's ``qwen2_5_training``, which has generation blocks, so transformers can
mask it). Per size and round, in one process, interleaved:

* ours: ``Tokenize`` on an Arrow batch of canonical rows (decode, render with
  spans, check, one batched tokenizer call with offsets, Arrow columns out);
* transformers: ``tokenizer.apply_chat_template(..., return_dict=True,
  return_assistant_tokens_mask=True)`` row by row;
* prefix-diff: two extra renders and tokenizations per assistant turn.

Medians of ``--repeat`` rounds; ratios are against ours. The masks of ours
and transformers are compared token for token.

    python benchmarks/bench_token_masks.py

``--unique-rows N`` measures at scale instead, on N rows whose texts are all
unique (``benchmarks/_unique_rows.py``), side by side in one run: transformers'
masked ``apply_chat_template`` row by row over the dataset's batches, then
``ds.with_format("arrow").map(tokenize(tok), batched=True)`` with
``num_proc=1`` and ``num_proc=2`` (each into a cache folder of its own, so no
run reuses another's shard count), CPU seconds per process as well as wall,
the rows and CPU seconds of each worker, and the load average around each run:

    python benchmarks/bench_token_masks.py --unique-rows 100000

``--phases N`` measures the phases apart, in CPU milliseconds a row of one
thread (``TOKENIZERS_PARALLELISM=false``) on N fresh unique rows (``--family``
as for ``--floor``): the floor's halves (transformers' plain render, then
``encode_batch_fast`` 128 texts at a time); the encoder (``PieceEncoder`` on
the same texts, after a warm-up on other rows, as the encoding thread runs it);
the render with its mask check (``Tokenize.checked_spans`` inside one batch's
scope, as the main thread runs it), the span render alone and a plain render
in the same sandbox; and the whole transform on 1,000-row Arrow batches (its
main thread, and both threads):

    python benchmarks/bench_token_masks.py --phases 2000 --family qwen

``--floor N`` measures ``tokenize`` against its floor on N unique rows with tools, side by side in one run
and round by round (``--repeat`` rounds, medians): the floor is transformers' plain render of each row
(``apply_chat_template(..., tokenize=False)``) plus one batch encode of the rendered texts without offsets
(``encode_batch_fast``); then transformers' masked ``apply_chat_template`` row by row and
``ds.with_format("arrow").map(tokenize(tok), batched=True)`` (a new transform per round) into a fresh cache
file. Masks are compared with transformers' on every row. ``--family llama`` uses Llama 3.1's template (its
generation blocks) and a SentencePiece-style tokenizer (Metaspace, BPE with byte fallback) instead of Qwen2.5's
and byte-level BPE; its rows' tool-call turns carry no text (the template writes a call alone and drops the text
beside it, a turn tokenize refuses). ``--template`` picks another trl template for the qwen family
(``qwen3_training``):

    python benchmarks/bench_token_masks.py --floor 5000 --family qwen
    python benchmarks/bench_token_masks.py --floor 5000 --family llama
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.prefix_diff import prefix_diff_mask  # noqa: E402
from tests.support.tiny_lm import LLAMA3_TOKENS, train_sentencepiece_tokenizer, train_tokenizer, trl_template  # noqa: E402
from whileai_datasets.rows.features import MESSAGE_TYPE, message_from_storage, message_to_storage, storage_type  # noqa: E402
from whileai_datasets.tokenize.token_masks import Tokenize, template_messages  # noqa: E402


def conversation(turns: int, seed: int) -> dict[str, Any]:
    """A canonical row with ``turns`` assistant turns: each answers a user ask,
    every third with a tool call (and its result) instead of text."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful support agent."}]
    for t in range(turns):
        messages.append({"role": "user", "content": f"Question {t} about order ORD-{seed * 100 + t}, please check."})
        if t % 3 == 0:
            call_id = f"call_{t:04d}"
            call = {"id": call_id, "type": "function",
                    "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": f"ORD-{t}"})}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append({"role": "tool", "content": json.dumps({"status": "ok", "eta": t}), "name": "lookup_order",
                             "tool_call_id": call_id})
        else:
            messages.append({"role": "assistant", "content": f"Order ORD-{t} ships in {t % 5 + 1} days."})
    mask = [1 if m["role"] == "assistant" else 0 for m in messages]
    return {"messages": messages, "loss_mask": mask, "tools": None}


def arrow_batch(rows: list[dict[str, Any]]) -> Any:
    """Canonical rows as the Arrow batch ``ds.with_format('arrow').map`` hands a transform."""
    import pyarrow as pa

    messages = [[message_to_storage(m) for m in r["messages"]] for r in rows]
    return pa.table({"messages": pa.array(messages, pa.list_(storage_type(MESSAGE_TYPE))),
                     "loss_mask": pa.array([r["loss_mask"] for r in rows], pa.list_(pa.int8())),
                     "tools": pa.array([json.dumps(r["tools"]) if r.get("tools") else None for r in rows],
                                       pa.string())})


def seeded_rows(limit: int) -> list[dict[str, Any]]:
    """whileai seeded-agent rows (benchmarks/_data.py), loaded by the builder: system prompt, tools, calls."""
    import datasets

    import whileai_datasets  # noqa: F401
    from benchmarks._data import SYSTEM_PROMPT, TOOLS, make_export_file

    path = make_export_file(None, limit)
    ds = datasets.load_dataset("whileai/export", data_files=str(path), split="train", system_prompt=SYSTEM_PROMPT,
                               tools=TOOLS)
    return [{"messages": r["messages"], "loss_mask": r["loss_mask"], "tools": r["tools"]} for r in ds]


def transformers_masks(tokenizer: Any, rows: list[list[dict[str, Any]]], tools: list[Any]) -> list[tuple[list[int], list[int]]]:
    out = []
    for messages, row_tools in zip(rows, tools):
        encoded = tokenizer.apply_chat_template(messages, tools=row_tools or None, return_dict=True,
                                                return_assistant_tokens_mask=True)
        out.append((list(encoded["input_ids"]), list(encoded["assistant_masks"])))
    return out


def measure(args: argparse.Namespace, tokenizer: Any, transform: Tokenize, template: str,
            rows: list[dict[str, Any]], label: str) -> dict[str, Any]:
    batch = arrow_batch(rows)
    tools = [r.get("tools") for r in rows]
    shaped = [template_messages(r["messages"]) for r in rows]
    masks = [r["loss_mask"] for r in rows]
    times: dict[str, list[float]] = {"ours": [], "transformers": [], "prefix_diff": []}
    for _ in range(args.repeat):
        start = time.perf_counter()
        ours = transform(batch)
        times["ours"].append(time.perf_counter() - start)
        start = time.perf_counter()
        theirs = transformers_masks(tokenizer, shaped, tools)
        times["transformers"].append(time.perf_counter() - start)
        if not args.skip_prefix_diff:
            start = time.perf_counter()
            for m, k, t in zip(shaped, masks, tools):
                prefix_diff_mask(tokenizer, template, m, k, tools=t or None)
            times["prefix_diff"].append(time.perf_counter() - start)
    same = sum(a == list(ids) and b == list(mask) for (a, b), ids, mask in
               zip(theirs, ours.column("input_ids").to_pylist(), ours.column("assistant_masks").to_pylist()))
    medians = {k: statistics.median(v) for k, v in times.items() if v}
    tokens = int(sum(ours.column("num_tokens").to_pylist()))
    return {"rows_kind": label, "rows": len(rows), "tokens": tokens, "same_masks": same,
            "seconds": medians, "vs_transformers": medians["transformers"] / medians["ours"],
            "vs_prefix_diff": medians["prefix_diff"] / medians["ours"] if "prefix_diff" in medians else None}


def transformers_over(tokenizer: Any, ds: Any) -> list[tuple[Any, Any]]:
    """transformers' masked apply_chat_template on every row of ``ds``, decoded batch by batch (each row's ids
    and mask kept as numpy arrays: 100k rows of Python int lists took GBs)."""
    import numpy as np

    out = []
    for batch in ds.with_format("arrow").iter(batch_size=1000):
        tools = [json.loads(t) if t else None for t in batch.column("tools").to_pylist()]
        rows = [template_messages([message_from_storage(m) for m in row]) for row in batch.column("messages").to_pylist()]
        out += [(np.asarray(ids, np.int64), np.asarray(mask, np.int64))
                for ids, mask in transformers_masks(tokenizer, rows, tools)]
    return out


def same_rows(theirs: list[tuple[Any, Any]], table: Any) -> int:
    """Rows of ``table`` whose input_ids and assistant_masks equal transformers', compared a record batch at a time."""
    import numpy as np

    same, row = 0, 0
    for batch in table.to_batches(max_chunksize=1000):
        columns = [batch.column(name) for name in ("input_ids", "assistant_masks")]
        flat = [(c.values.to_numpy(zero_copy_only=False), c.offsets.to_numpy()) for c in columns]
        for i in range(batch.num_rows):
            same += all(np.array_equal(expected, values[offsets[i]:offsets[i + 1]])
                        for expected, (values, offsets) in zip(theirs[row], flat))
            row += 1
    return same


@dataclass(frozen=True)
class Recorded:
    """``transform``, appending each call's pid, rows and CPU seconds (its threads' too) to ``log``."""

    transform: Tokenize
    log: str

    def __call__(self, batch: Any) -> Any:
        start = time.process_time()
        out = self.transform(batch)
        with open(self.log, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()} {batch.num_rows} {time.process_time() - start:.4f}\n")
        return out


def per_worker(log: Path) -> dict[str, dict[str, float]]:
    """{pid: {rows, cpu_seconds}} from a ``Recorded`` log."""
    workers: dict[str, dict[str, float]] = {}
    for line in log.read_text().splitlines():
        pid, rows, cpu = line.split()
        entry = workers.setdefault(pid, {"rows": 0, "cpu_seconds": 0.0})
        entry["rows"] += int(rows)
        entry["cpu_seconds"] = round(entry["cpu_seconds"] + float(cpu), 2)
    return workers


OURS = {"ours num_proc=1": None, "ours num_proc=2": 2}  # label: num_proc


def _ours(ds: Any, transform: Tokenize, num_proc: int | None, folder: Path) -> Any:
    """One run into a cache folder of its own: no earlier cache file exists whose shard count datasets could
    reuse (datasets 5.2 keeps it for the same fingerprint, see README), so ``num_proc`` is what runs."""
    fresh = folder / f"num_proc-{num_proc}"
    fresh.mkdir()
    log = fresh / "calls.log"
    log.touch()
    return ds.with_format("arrow").map(Recorded(transform, str(log)), batched=True, num_proc=num_proc,
                                       cache_file_name=str(fresh / "tokenized.arrow"))


def at_scale(args: argparse.Namespace) -> None:
    """The three side by side on ``--unique-rows`` unique rows; prints seconds and ratios."""
    import resource
    import tempfile

    from benchmarks._unique_rows import corpus, unique_dataset

    ds = unique_dataset(args.unique_rows)
    tokenizer = train_tokenizer(corpus(), chat_template=trl_template(args.template))
    transform = Tokenize(tokenizer)
    seconds: dict[str, float] = {}
    cpu: dict[str, float] = {}
    load: dict[str, tuple[float, float]] = {}
    workers: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent / ".data") as folder:
        for label, run in [("transformers", lambda: transformers_over(tokenizer, ds)),
                           *[(label, lambda n=n: _ours(ds, transform, n, Path(folder))) for label, n in OURS.items()]]:
            before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            load_before = os.getloadavg()[0]
            start = time.perf_counter()
            result = run()
            seconds[label] = time.perf_counter() - start
            load[label] = (load_before, os.getloadavg()[0])
            after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[label] = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before))
            if label == "transformers":
                theirs = result
            else:
                workers[label] = per_worker(Path(folder) / f"num_proc-{OURS[label]}" / "calls.log")
            if label == "ours num_proc=1":
                table = result.with_format("arrow")[:]
                same = same_rows(theirs, table)
            print(f"  {label}: {seconds[label]:.1f} s (load {load[label][0]:.1f} -> {load[label][1]:.1f})", file=sys.stderr)
    report = {"rows": len(ds), "seconds": seconds, "cpu_seconds": cpu, "same_masks": same,
              "vs_transformers": seconds["transformers"] / seconds["ours num_proc=1"],
              "vs_transformers_cpu": cpu["transformers"] / cpu["ours num_proc=1"],
              "num_proc_2_vs_1": seconds["ours num_proc=1"] / seconds["ours num_proc=2"],
              "load_average": load, "workers": workers,
              "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    _print_at_scale(report, f"{args.template} ({transform.plan.method})")


def _print_at_scale(report: dict[str, Any], template: str) -> None:
    rows = report["rows"]
    print(f"{rows:,} rows with unique texts, {template}, one run")
    for label, wall in report["seconds"].items():
        start, end = report["load_average"][label]
        print(f"  {label:>16}: {wall:8.1f} s wall {report['cpu_seconds'][label]:8.1f} s CPU  (load {start:.1f} -> {end:.1f})")
        for pid, worker in report["workers"].get(label, {}).items():
            print(f"  {'':>16}  worker {pid}: {worker['rows']:,} rows, {worker['cpu_seconds']:.1f} s CPU")
    print(f"  ours vs transformers: {report['vs_transformers']:.2f}x wall, {report['vs_transformers_cpu']:.2f}x CPU; "
          f"num_proc=2 vs 1: {report['num_proc_2_vs_1']:.2f}x wall; same masks {report['same_masks']:,}/{rows:,}")


def phases(args: argparse.Namespace) -> None:
    """Per-row CPU of each phase, one thread each (``--phases``): the floor's two halves and ours' parts."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from benchmarks import _unique_rows as unique_rows
    from whileai_datasets.tokenize.token_encode import PieceEncoder

    tokenizer = family_tokenizer(args.family, args.template)
    transform = Tokenize(tokenizer)
    backend = tokenizer.backend_tokenizer
    n = args.phases
    beside = _text_beside_calls(args.family)

    def unique_row(index: int) -> dict[str, Any]:
        return unique_rows.unique_row(index, beside)

    def texts(first: int) -> list[str]:
        return [tokenizer.apply_chat_template(template_messages(r["messages"]), tools=r["tools"], tokenize=False)
                for r in (unique_row(first + i) for i in range(n))]

    encoder = PieceEncoder()
    warm = texts(7_000_000)
    for start in range(0, len(warm), 128):  # the first batch is checked, long repeats become pieces
        encoder.encode(backend, warm[start:start + 128])
    ms: dict[str, float] = {}
    fresh = [unique_row(8_000_000 + i) for i in range(n)]
    shaped = [template_messages(r["messages"]) for r in fresh]
    rendered, ms["floor: transformers plain render"] = _per_row(n, lambda: [
        tokenizer.apply_chat_template(m, tools=r["tools"], tokenize=False) for m, r in zip(shaped, fresh)])
    fast = getattr(backend, "encode_batch_fast", backend.encode_batch)
    _, ms["floor: encode_batch_fast"] = _per_row(n, lambda: [
        fast(rendered[i:i + 128], add_special_tokens=False) for i in range(0, n, 128)])
    _, ms["ours: encoder"] = _per_row(n, lambda: [
        encoder.encode(backend, rendered[i:i + 128]) for i in range(0, n, 128)])
    rows = [unique_row(9_000_000 + i) for i in range(n)]
    ms.update(_render_phases(transform, rows))
    batches = [arrow_batch(rows[i:i + 1000]) for i in range(0, n, 1000)]
    transform(arrow_batch([unique_row(6_000_000 + i) for i in range(256)]))  # its encoder's first batch
    process = time.process_time()
    _, ms["ours: __call__, main thread"] = _per_row(n, lambda: [transform(batch) for batch in batches])
    ms["ours: __call__, both threads"] = (time.process_time() - process) / n * 1e3
    ms["ours / floor, CPU"] = ms["ours: __call__, both threads"] / (
        ms["floor: transformers plain render"] + ms["floor: encode_batch_fast"])
    report = {"rows": n, "family": args.family, "encoder_ms_per_row": round(ms["ours: encoder"], 3),
              "render_and_check_ms_per_row": round(ms["ours: render + mask check"], 3),
              "ms_per_row": {k: round(v, 3) for k, v in ms.items()}, "load_average": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(report))
        return
    print(f"{n:,} fresh unique rows, {args.family}, one thread each (TOKENIZERS_PARALLELISM=false), ms a row:")
    for label, value in ms.items():
        print(f"  {label:>38}: {value:.3f}")
    print(f"  (load {report['load_average']:.1f})")


def _per_row(n: int, run: Any) -> tuple[Any, float]:
    """``run()`` and the calling thread's CPU milliseconds per row, after a full collection (no phase pays for
    the objects an earlier one left)."""
    gc.collect()
    clock = time.thread_time()
    out = run()
    return out, (time.thread_time() - clock) / n * 1e3


def _render_phases(transform: Tokenize, rows: list[dict[str, Any]]) -> dict[str, float]:
    """The main thread's render per row: with spans and the mask check, with spans alone, plain (our sandbox)."""
    from whileai_datasets.chat_template.rendering.render import batch_inputs, render_chat, render_plain
    from whileai_datasets.chat_template.sandbox.budget import budget_scope

    chat, n = transform.chat, len(rows)
    shaped = [template_messages(r["messages"], transform.plan.arguments) for r in rows]
    out: dict[str, float] = {}

    def each(render: Any) -> list[Any]:
        done = []
        with batch_inputs():
            for messages, row in zip(shaped, rows):
                with budget_scope(chat.budget):
                    done.append(render(messages, row))
        return done

    _, out["ours: render + mask check"] = _per_row(n, lambda: each(
        lambda m, r: transform.checked_spans(r["messages"], r["tools"], r["loss_mask"])))
    _, out["ours: span render alone"] = _per_row(n, lambda: each(
        lambda m, r: render_chat(chat.text, m, tools=r["tools"], kwargs=chat.special_tokens, name=chat.name)))
    _, out["ours: plain render, same sandbox"] = _per_row(n, lambda: each(
        lambda m, r: render_plain(chat.text, m, tools=r["tools"], kwargs=chat.special_tokens, name=chat.name)))
    out["span render / plain render"] = out["ours: span render alone"] / out["ours: plain render, same sandbox"]
    return out


def _text_beside_calls(family: str) -> bool:
    """Whether the family's rows write text beside their tool calls (Llama 3.1's template drops it)."""
    return family != "llama"


def family_tokenizer(family: str, template: str) -> Any:
    """The benchmark tokenizer of a template family: Qwen2.5 (trl's ``template``) with byte-level BPE, or
    Llama 3.1 (the shipped template, generation blocks included) with a SentencePiece-style tokenizer."""
    from benchmarks._unique_rows import corpus

    if family == "qwen":
        return train_tokenizer(corpus(), chat_template=trl_template(template))
    from whileai_datasets.chat_template import ChatTemplate

    return train_sentencepiece_tokenizer(corpus(), chat_template=ChatTemplate.shipped("llama3_1").text,
                                         **LLAMA3_TOKENS)


def _decoded(ds: Any) -> list[tuple[list[list[dict[str, Any]]], list[Any]]]:
    """The dataset's rows as transformers takes them, batch by batch (messages, tools)."""
    out = []
    for batch in ds.with_format("arrow").iter(batch_size=1000):
        tools = [json.loads(t) if t else None for t in batch.column("tools").to_pylist()]
        rows = [template_messages([message_from_storage(m) for m in row]) for row in batch.column("messages").to_pylist()]
        out.append((rows, tools))
    return out


def _timed(run: Any) -> tuple[Any, float, float]:
    """``run()``'s result, wall seconds and CPU seconds of the whole process (all its threads).

    The cyclic collector is run first, so no step pays for the objects an earlier one left (the decoded rows,
    transformers' results): a full collection they make due lands in whichever step runs next, and at 20,000
    rows one walks some 500,000 objects."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    out = run()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _floor_round(tokenizer: Any, ds: Any, transform: Tokenize, folder: Path, round_: int) -> dict[str, Any]:
    """One round: decode, plain render, batch encode (the floor), transformers masked, ours; seconds each."""
    backend = tokenizer.backend_tokenizer
    fast = getattr(backend, "encode_batch_fast", backend.encode_batch)
    seconds: dict[str, float] = {}
    cpu: dict[str, float] = {}
    decoded, seconds["decode"], cpu["decode"] = _timed(lambda: _decoded(ds))
    texts, seconds["plain render"], cpu["plain render"] = _timed(lambda: [
        [tokenizer.apply_chat_template(m, tools=t or None, tokenize=False) for m, t in zip(rows, tools)]
        for rows, tools in decoded])
    # each batch's encodings are dropped as the next is made (their freeing counted here, as ours counts its
    # own): kept, the 20,000 rows' encodings held some 1.5 GB of the tokenizer's heap through the steps
    # after, and ours ran 1.25x slower beside them than right after the round (measured twice)
    _, seconds["batch encode"], cpu["batch encode"] = _timed(
        lambda: [len(fast(batch, add_special_tokens=False)) for batch in texts])
    theirs, seconds["transformers masked"], cpu["transformers masked"] = _timed(lambda: [
        (np.asarray(ids, np.int64), np.asarray(mask, np.int64)) for rows, tools in decoded
        for ids, mask in transformers_masks(tokenizer, rows, tools)])
    target = str(folder / f"round-{round_}.arrow")
    ours, seconds["ours"], cpu["ours"] = _timed(
        lambda: ds.with_format("arrow").map(transform, batched=True, cache_file_name=target))
    same = same_rows(theirs, ours.with_format("arrow")[:])
    return {"seconds": seconds, "cpu_seconds": cpu, "same_masks": same}


def at_floor(args: argparse.Namespace) -> None:
    """``--floor``: ours against the floor and transformers, side by side, medians of ``--repeat`` rounds."""
    import tempfile

    from benchmarks._unique_rows import unique_dataset

    ds = unique_dataset(args.floor, text_beside_calls=_text_beside_calls(args.family))
    tokenizer = family_tokenizer(args.family, args.template)
    rounds = []
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent / ".data") as folder:
        for round_ in range(args.repeat):
            # a transform of its own per round, as one map over a dataset has: the same one again would meet
            # every long text a second time and reuse it as a piece (the rows are unique only once)
            transform = Tokenize(tokenizer)
            rounds.append(_floor_round(tokenizer, ds, transform, Path(folder), round_))
            print(f"  round {round_}: " + ", ".join(f"{k} {v:.2f} s ({rounds[-1]['cpu_seconds'][k]:.2f} CPU)"
                                                    for k, v in rounds[-1]["seconds"].items()), file=sys.stderr)
    ratios = {kind: _floor_ratios(rounds, kind) for kind in ("seconds", "cpu_seconds")}
    vs_floor, vs_transformers = ratios["seconds"]
    report = {"rows": len(ds), "family": args.family, "template": args.template if args.family == "qwen" else "llama3_1",
              "mask_method": transform.plan.method,
              "encoder": _encoder_kind(transform),
              "seconds": {k: statistics.median(r["seconds"][k] for r in rounds) for k in rounds[0]["seconds"]},
              "cpu_seconds": {k: statistics.median(r["cpu_seconds"][k] for r in rounds) for k in rounds[0]["seconds"]},
              "ours_over_floor": vs_floor, "vs_transformers": vs_transformers,
              "ours_over_floor_cpu": ratios["cpu_seconds"][0], "vs_transformers_cpu": ratios["cpu_seconds"][1],
              "per_round": [{k: round(v, 3) for k, v in r["seconds"].items()} for r in rounds],
              "same_masks": min(r["same_masks"] for r in rounds), "rounds": len(rounds),
              "load_average": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    name = args.family if args.family == "llama" else f"{args.family}: {args.template}"
    print(f"{len(ds):,} unique rows with tools, {name} ({transform.plan.method}; encoder: {report['encoder']}), "
          f"medians of {len(rounds)} rounds")
    for label, value in report["seconds"].items():
        print(f"  {label:>20}: {value:7.2f} s wall {report['cpu_seconds'][label]:7.2f} s CPU")
    print(f"  ours / (plain render + batch encode): {vs_floor:.2f} wall, {report['ours_over_floor_cpu']:.2f} CPU "
          f"(target <= 1.1, issue 46); ours vs transformers masked: {vs_transformers:.2f}x wall, "
          f"{report['vs_transformers_cpu']:.2f}x CPU (target >= 2.5x); "
          f"same masks {report['same_masks']:,}/{len(ds):,} (load {report['load_average']:.1f}; ratios are medians "
          f"of the rounds' own ratios)")


def _floor_ratios(rounds: list[dict[str, Any]], kind: str) -> tuple[float, float]:
    """Medians over rounds of ours / (plain render + batch encode) and transformers masked / ours."""
    return (statistics.median(r[kind]["ours"] / (r[kind]["plain render"] + r[kind]["batch encode"]) for r in rounds),
            statistics.median(r[kind]["transformers masked"] / r[kind]["ours"] for r in rounds))


def _encoder_kind(transform: Tokenize) -> str:
    """Which encode path the transform's encoder settled on (after its first batch)."""
    encoder = transform.encoder
    if encoder._pattern is None:
        return "whole texts, tokenizer offsets"
    return "pieces, offsets from ids" if encoder._lengths is not None else "pieces, tokenizer offsets"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200, help="conversations per size")
    parser.add_argument("--turns", default="2,8,32")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--template", default="qwen2_5_training", help="a template trl ships")
    parser.add_argument("--skip-prefix-diff", action="store_true")
    parser.add_argument("--seeded", type=int, default=1248, help="also whileai seeded-agent rows (0: none)")
    parser.add_argument("--unique-rows", type=int, default=0, help="measure at scale on this many unique rows")
    parser.add_argument("--phases", type=int, default=0, help="CPU per row of the encoder and the render, apart")
    parser.add_argument("--floor", type=int, default=0, help="ours against its floor on this many unique rows")
    parser.add_argument("--family", choices=("qwen", "llama"), default="qwen", help="template and tokenizer (--floor)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.floor:
        at_floor(args)
        return
    if args.phases:
        phases(args)
        return
    if args.unique_rows:
        at_scale(args)
        return
    seeded = seeded_rows(args.seeded) if args.seeded else []
    corpus = [json.dumps(conversation(8, s)) for s in range(50)] + [json.dumps(r) for r in seeded[:200]]
    template = trl_template(args.template)
    tokenizer = train_tokenizer(corpus, chat_template=template)
    transform = Tokenize(tokenizer)
    sets = [(f"{turns} turns", [conversation(turns, s) for s in range(args.rows)])
            for turns in [int(x) for x in args.turns.split(",")]]
    if seeded:
        sets.append(("seeded agent", seeded))
    results = []
    for label, rows in sets:
        results.append(measure(args, tokenizer, transform, template, rows, label))
        if not args.json:
            print(f"  measured {label}", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"token masks on {args.template} ({transform.plan.method}), median of {args.repeat}")
    print(f"  {'rows':>22} {'tokens':>8} {'ours s':>8} {'transformers s':>15} {'prefix-diff s':>14} "
          f"{'vs transformers':>16} {'vs prefix-diff':>15} {'same masks':>11}")
    for r in results:
        sec = r["seconds"]
        diff = f"{sec['prefix_diff']:>14.3f}" if "prefix_diff" in sec else f"{'-':>14}"
        vs_diff = f"{r['vs_prefix_diff']:>14.1f}x" if r["vs_prefix_diff"] else f"{'-':>15}"
        print(f"  {r['rows']:>5} x {r['rows_kind']:>14} {r['tokens']:>8} {sec['ours']:>8.3f} {sec['transformers']:>15.3f} "
              f"{diff} {r['vs_transformers']:>15.2f}x {vs_diff} {r['same_masks']:>5}/{r['rows']}")


if __name__ == "__main__":
    main()
