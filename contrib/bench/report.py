"""Tables, targets and plots from the benchmark figures (figures.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["check_targets", "tables", "plot_all"]


def _get(d: Any, *keys: Any) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


# Evidence shown before issue 15 (commit 3681ed4: 400-token chunks, a 700-character window on the
# longest query term), hybrid turn recall@10: as shown, and the same ranking shown as whole chunks.
EVIDENCE_BEFORE = {"lme": {"shown": 0.476, "whole": 0.529}, "chats": {"shown": 0.692, "whole": 0.764}}


def _conversation_targets(f: dict[str, Any], add: Any) -> None:
    ev = _get(f, "conversation", "evidence") or {}
    for name, before in EVIDENCE_BEFORE.items():
        tr = _get(ev, name, "hybrid", "turn_recall@10")
        if tr is not None:
            bar = max(before["shown"] + 0.15, before["whole"])
            add(
                f"{name}: hybrid turn recall@10 ≥ {before['shown']:.3f} + 0.15 and ≥ whole chunks before "
                f"({before['whole']:.3f})",
                tr,
                tr >= bar,
                f"{tr:.3f}",
            )
    hyb = _get(f, "quality", "scifact", "hybrid", "ndcg@10")
    if hyb is not None:
        add("SciFact hybrid nDCG@10 stays ≥ 0.745", hyb, hyb >= 0.745, f"{hyb:.3f}")
    for name, modes in (_get(f, "conversation", "cjk") or {}).items():
        h, k = _get(modes, "hybrid", "hit@1"), _get(modes, "bm25", "hit@1")
        if h is not None and k is not None:
            add(f"CJK {name}: hybrid hit@1 ≥ keyword-only", h, h >= k, f"{h:.3f} vs {k:.3f}")
        t = _get(modes, "bm25-trigram", "hit@1")
        if t is not None and k is not None:
            add(f"CJK {name}: keyword hit@1, trigram ≥ unicode61", t, t >= k, f"{t:.3f} vs {k:.3f}")


def _time_targets(f: dict[str, Any], add: Any) -> None:
    lme = _get(f, "time", "longmemeval") or {}
    on = lme.get("time on + decay") or lme.get("time on")
    if on:
        by = on["recall_any@10_by_type"]
        add("LongMemEval, time features on: temporal-reasoning recall_any@10 ≥ 0.85", by["temporal-reasoning"],
            by["temporal-reasoning"] >= 0.85, f"{by['temporal-reasoning']:.3f}")
        add("LongMemEval, time features on: knowledge-update recall_any@10 ≥ 0.97", by["knowledge-update"],
            by["knowledge-update"] >= 0.97, f"{by['knowledge-update']:.3f}")
        add(
            "LongMemEval, time features on: hybrid recall_any@10 ≥ 0.85",
            on["recall_any@10"],
            on["recall_any@10"] >= 0.85,
            f"{on['recall_any@10']:.3f}",
        )
    for with_decay, without in (("time on + decay", "time on"), ("decay (time off)", "time off")):
        a, b = _get(lme, with_decay, "recall_any@10"), _get(lme, without, "recall_any@10")
        if a is not None and b is not None:
            add(
                f"LongMemEval: decay on never below decay off ({with_decay} vs {without})",
                a,
                a >= b,
                f"{a:.3f} vs {b:.3f}",
            )
    sf = _get(f, "time", "scifact")
    if sf:
        add("SciFact: no ranking changes with time features on", sf["rankings_changed"], sf["rankings_changed"] == 0,
            f"{sf['rankings_changed']} of {sf['queries']} changed")
    p95 = _get(f, "time", "parser", "p95_ms")
    if p95 is not None:
        add("time-expression parser adds < 2 ms p95", p95, p95 < 2, f"{p95:.3f} ms")
    for set_name, figures in (_get(f, "time", "time_only") or {}).items():
        rows = {t: r for t, r in figures.items() if isinstance(r, dict) and t != "all"}
        if rows:
            top1, top5 = min(r["top1"] for r in rows.values()), min(r["top5"] for r in rows.values())
            empty = max(r["empty"] for r in rows.values())
            add(f"time-only questions ({set_name}): top-1 in window ≥ 0.95 for every template", top1, top1 >= 0.95,
                f"lowest {top1:.3f}")
            add(
                f"time-only questions ({set_name}): any of top 5 in window ≥ 0.98 for every template",
                top5,
                top5 >= 0.98,
                f"lowest {top5:.3f}",
            )
            add(f"time-only questions ({set_name}): no empty answer", empty, empty == 0, f"{empty:.3f}")


def _speed_targets(f: dict[str, Any], add: Any) -> None:
    """Issue 20: embedding throughput, one million chunks, the second CLI call."""
    for name, r in (_get(f, "embed_speed", "sets") or {}).items():
        add(
            f"local-model indexing ≥ 2.0× the baseline's characters/s ({name}, same run)",
            r["ratio"],
            r["ratio"] >= 2.0,
            f"{r['ratio']:.2f}× ({r['before_chars_s']:,} → {r['after_chars_s']:,} chars/s)",
        )
    for mode, change in (_get(f, "int8_quality", "change") or {}).items():
        worst = min(change.values())
        add(f"LongMemEval {mode}: the int8 graph within 0.005 of the fp32 graph (same run)", worst, worst >= -0.005,
            ", ".join(f"{k} {v:+.4f}" for k, v in change.items()))
    mi = _get(f, "million") or {}
    hyb = _get(mi, "search_in_process", "hybrid", "p95_ms")
    if hyb is not None:
        add(
            f"in-process hybrid search p95 ≤ 150 ms at {mi['chunks']:,} chunks (synthetic vectors, query embedding "
            f"included)",
            hyb,
            hyb <= 150,
            f"{hyb:.1f} ms",
        )
    rec = _get(mi, "search_in_process", "vector_side", "recall_at_10_vs_exact")
    if rec is not None:
        add("vector side recall@10 ≥ 0.95 of the exact scan at 1M chunks", rec, rec >= 0.95, f"{rec:.3f}")
    build = _get(mi, "index_fts", "seconds")
    if build is not None:
        add(f"keyword-only index build of {mi['index_fts']['chunks']:,} chunks ≤ 4 min", build, build <= 240,
            f"{build:.0f} s, {mi['index_fts']['index_mb']:,.0f} MB on disk")
    for key, label in (("second_call", "keyword index"), ("second_call_hybrid", "hybrid, local model")):
        sc = _get(f, key) or {}
        p50 = _get(sc, "second_call", "p50_ms")
        if p50 is None:
            continue
        qmd = _get(sc, "qmd_search", "p50_ms")
        add(f"second `memsift search` p50 ≤ 60 ms at 10k files ({label})", p50, p50 <= 60, f"{p50:.0f} ms")
        if qmd is not None:
            add(
                f"second `memsift search` faster than `qmd search` ({label})",
                p50,
                p50 < qmd,
                f"{p50:.0f} ms vs {qmd:.0f} ms",
            )


def check_targets(f: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the benchmark issue with the measured figure beside it."""
    out: list[dict[str, Any]] = []

    def add(name: str, measured: Any, met: bool | None, shown: str) -> None:
        out.append({"target": name, "measured": measured, "met": met, "shown": shown})

    sf = _get(f, "quality", "scifact") or {}
    if sf:
        bm25, vec, hyb = (_get(sf, m, "ndcg@10") for m in ("bm25", "vector", "hybrid"))
        add("SciFact nDCG@10, BM25-only ≥ 0.66", bm25, bm25 is not None and bm25 >= 0.66, f"{bm25:.3f}")
        best = max(x for x in (bm25, vec) if x is not None)
        add("SciFact nDCG@10, hybrid ≥ 0.68 and above both components", hyb, hyb >= 0.68 and hyb > best,
            f"{hyb:.3f} (BM25 {bm25:.3f}, vector {vec:.3f})")
    r10 = _get(f, "quality", "longmemeval", "hybrid", "recall_any@10")
    if r10 is not None:
        add("LongMemEval shared pool, hybrid recall_any@10 ≥ 0.75", r10, r10 >= 0.75, f"{r10:.3f}")
    _conversation_targets(f, add)
    _time_targets(f, add)
    _speed_targets(f, add)
    sc = _get(f, "scale") or {}
    for size, limit in (("10000", 50.0), ("100000", 150.0)):
        p95 = _get(sc, size, "memsift", "search_in_process", "hybrid", "p95_ms")
        if p95 is not None:
            add(
                f"in-process hybrid search p95 ≤ {limit:.0f} ms at {int(size):,} chunks (query embedding included)",
                p95,
                p95 <= limit,
                f"{p95:.1f} ms",
            )
    for size, row in sorted(sc.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
        if not size.isdigit() or not _get(row, "qmd"):
            continue
        cold, res, qmd = (
            _get(row, *p)
            for p in (
                ("memsift", "cli_search", "p50_ms"),
                ("memsift", "cli_search_resident", "p50_ms"),
                ("qmd", "cli_search", "p50_ms"),
            )
        )
        if cold is None or qmd is None:
            continue
        add(f"CLI search faster than `qmd search` at {int(size):,} files (p50), cold start", cold, cold < qmd,
            f"{cold:.0f} ms vs {qmd:.0f} ms")
        if res is not None:
            add(
                f"CLI search faster than `qmd search` at {int(size):,} files (p50), `memsift watch` running",
                res,
                res < qmd,
                f"{res:.0f} ms vs {qmd:.0f} ms",
            )
    fts, qadd = _get(sc, "10000", "memsift", "index_fts", "seconds"), _get(sc, "10000", "qmd", "index", "seconds")
    if fts and qadd:
        add(
            "FTS-only indexing of 10k files ≥ 3× faster than QMD",
            qadd / fts,
            qadd / fts >= 3,
            f"{qadd / fts:.1f}× ({fts:.2f} s vs {qadd:.1f} s)",
        )
    nc = _get(sc, "10000", "memsift", "resync_fts", "nochange_s")
    if nc is not None:
        add("no-change re-sync of 10k files < 1 s", nc, nc < 1.0, f"{nc:.2f} s")
    return out


# --- tables -------------------------------------------------------------------------------------


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join([_row(head), _row(["---"] * len(head)), *(_row(r) for r in rows)])


def _n(x: Any, fmt: str = "{:.3f}") -> str:
    return "–" if x is None else fmt.format(x)


MODE_NAMES = {
    "bm25": "BM25 only (no embeddings)",
    "vector": "vector only (local MiniLM)",
    "hybrid": "hybrid (default)",
    "hybrid+mmr": "hybrid + MMR",
    "hybrid+decay": "hybrid + temporal decay",  # bounded (the default formula) since issue 18
    "qmd": "QMD 2.8.3 `search`",
}


def _conversation_tables(f: dict[str, Any]) -> list[str]:
    parts = []
    ev = _get(f, "conversation", "evidence") or {}
    if ev:
        rows = []
        for name, modes in ev.items():
            before = EVIDENCE_BEFORE.get(name)
            if before:
                rows.append([name, "hybrid before (400-token chunks)", _n(before["shown"]), "–", "–", "–", "–"])
            rows += [
                [
                    name,
                    MODE_NAMES[m],
                    _n(v["turn_recall@10"]),
                    _n(v["turn_recall@5"]),
                    _n(v["hit@10"]),
                    _n(v["mrr@10"]),
                    f"{v['chars@10']:,.0f}",
                ]
                for m, v in modes.items()
            ]
        parts.append(
            "**Evidence shown** (conversational dev sets: the answer turns among the lines the top hits show)\n\n"
            + _table(
                ["set", "mode", "turn recall@10", "turn recall@5", "hit@10", "MRR@10", "characters shown (top 10)"],
                rows,
            )
        )
    cjk = _get(f, "conversation", "cjk") or {}
    if cjk:
        modes = list(next(iter(cjk.values())))
        parts.append("**CJK questions** (cjk-dev, hit@1; the local model is English-only)\n\n" + _table(
            ["set", *modes], [[name, *[_n(_get(v, m, "hit@1")) for m in modes]] for name, v in cjk.items()]))
    return parts


def _time_tables(f: dict[str, Any]) -> list[str]:
    t = f.get("time") or {}
    parts = []
    lme = t.get("longmemeval") or {}
    if lme:
        types = sorted(next(iter(lme.values()))["recall_any@10_by_type"])
        parts.append(
            "**Time-aware search** (LongMemEval, hybrid, recall_any@10, each question at its own date)\n\n"
            + _table(
                ["question type", *lme],
                [["all", *[_n(v["recall_any@10"]) for v in lme.values()]]]
                + [[ty, *[_n(v["recall_any@10_by_type"].get(ty)) for v in lme.values()]] for ty in types],
            )
        )
    ev = t.get("evidence") or {}
    if ev:
        variants = list(next(iter(ev.values())))
        parts.append(
            "Evidence shown with time features (hybrid turn recall@10; near-empty first hit)\n\n"
            + _table(
                ["set", *variants],
                [
                    [name, *[f"{_n(v[x]['turn_recall@10'])} ({_n(v[x]['tiny_first'], '{:.2f}')})" for x in variants]]
                    for name, v in ev.items()
                ],
            )
        )
    if t.get("parser"):
        p = t["parser"]
        parts.append(
            f"Time-expression parser: p50 {p['p50_ms']:.3f} ms, p95 {p['p95_ms']:.3f} ms over {p['questions']} "
            f"questions "
            f"({p['naming_a_time']} name a time); first call in a new process {p['first_call_ms']:.0f} ms (imports "
            f"dateparser)."
        )
    only = t.get("time_only") or {}
    if only:
        sets = list(only)
        templates = list(dict.fromkeys(k for v in only.values() for k, r in v.items() if isinstance(r, dict)))
        parts.append(
            "**Time-only questions** (`timeonly.py`, default config and minScore; top-1 / top-5 in the window, "
            "empty answers)\n\n"
            + _table(
                ["template", *sets],
                [
                    [
                        tpl,
                        *[
                            (lambda r: f"{r['top1']:.3f} / {r['top5']:.3f} / {r['empty']:.3f}" if r else "–")(
                                only[x].get(tpl)
                            )
                            for x in sets
                        ],
                    ]
                    for tpl in templates
                ],
            )
        )
    if t.get("scifact"):
        sf = t["scifact"]
        parts.append(
            f"SciFact with time features on: {sf['rankings_changed']} of {sf['queries'] - sf['naming_a_time']} "
            f"rankings of "
            f"queries naming no time changed; {sf.get('timed_rankings_changed', '–')} of {sf['naming_a_time']} naming "
            f"one."
        )
    return parts


def _speed_tables(f: dict[str, Any]) -> list[str]:
    parts = []
    es = _get(f, "embed_speed", "sets") or {}
    if es:
        parts.append(
            "**Local-model indexing speed** (characters/s, baseline revision and today's code interleaved)\n\n"
            + _table(
                ["chunks", "before", "after", "ratio", "cosine to before (min)"],
                [
                    [
                        name,
                        f"{r['before_chars_s']:,}",
                        f"{r['after_chars_s']:,}",
                        f"{r['ratio']:.2f}×",
                        f"{r['min_cosine']:.3f}",
                    ]
                    for name, r in es.items()
                ],
            )
        )
    rows = []
    for key, label in (("second_call", "keyword index"), ("second_call_hybrid", "hybrid, local model")):
        sc = _get(f, key) or {}
        for part, name in (
            ("cold", "cold (MEMSIFT_NO_RESIDENT=1)"),
            ("second_call", "answered by the resident helper"),
            ("qmd_search", "`qmd search --json`"),
        ):
            if sc.get(part):
                rows.append([label, name, f"{sc[part]['p50_ms']:.0f} ms", f"{sc[part]['p95_ms']:.0f} ms"])
    if rows:
        parts.append(
            "**The second CLI search** (whole calls from new processes, 10,000 daily-log files)\n\n"
            + _table(["index", "call", "p50", "p95"], rows)
        )
    mi = _get(f, "million") or {}
    if mi.get("search_in_process"):
        sp, fts, vs = mi["search_in_process"], mi.get("index_fts") or {}, mi["search_in_process"]["vector_side"]
        rows = [
            [
                "keyword-only index build",
                f"{fts.get('seconds', 0):.0f} s ({fts.get('chunks_per_s', 0):,.0f} chunks/s), "
                f"{fts.get('index_mb', 0):,.0f} MB, {fts.get('peak_rss_mb', 0):,.0f} MB peak",
            ],
            ["index with synthetic vectors on disk", f"{mi['index_with_vectors_mb']:,} MB"],
            [
                "first vector search (sqlite-vec, while the codes load behind it) / codes in memory after",
                f"{sp['first_vector_search_s']} s / {sp.get('codes_loaded_s', '–')} s",
            ],
            *[
                [f"search in process, {m} (p50 / p95)", f"{sp[m]['p50_ms']} / {sp[m]['p95_ms']} ms"]
                for m in ("keyword", "vector", "hybrid")
            ],
            [
                "vector side: first pass + rescoring (p50 / p95)",
                f"{vs['first_pass_and_rescore_p50_ms']} / {vs['first_pass_and_rescore_p95_ms']} ms",
            ],
            ["vector side: sqlite-vec full scan (before, p50)", f"{vs['sqlite_vec_full_scan_p50_ms']} ms"],
            [
                "vector recall@10 against the exact scan (mean / worst query)",
                f"{vs['recall_at_10_vs_exact']:.3f} / {vs['recall_at_10_min']:.1f} (pool {vs['pool']})",
            ],
        ]
        parts.append(
            f"**One million chunks** ({mi['files']:,} daily-log files, {mi['chunks']:,} chunks; synthetic vectors, "
            f"real query embeddings)\n\n"
            + _table(["", "figure"], rows)
        )
    return parts


def tables(f: dict[str, Any]) -> str:
    parts: list[str] = []
    m = f.get("machine", {})
    parts.append(
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gb')} GB; {m.get('os')}; Python "
        f"{m.get('python')}, SQLite {m.get('sqlite')}, onnxruntime {m.get('onnxruntime')}; {m.get('qmd') or 'no QMD'}; "
        f"memsift {m.get('memsift_commit')}, {m.get('date')}."
    )
    sf = _get(f, "quality", "scifact")
    if sf:
        parts.append(
            "**SciFact** (BEIR test split, 300 queries, 5,183 abstracts; a document ranks at its best chunk)\n\n"
            + _table(
                ["mode", "nDCG@10", "recall@10", "MRR@10", "search p50 / p95"],
                [
                    [
                        MODE_NAMES[k],
                        _n(v["ndcg@10"]),
                        _n(v["recall@10"]),
                        _n(v["mrr@10"]),
                        f"{v['latency_ms']['p50']:.0f} / {v['latency_ms']['p95']:.0f} ms",
                    ]
                    for k, v in sf.items()
                ],
            )
        )
    lme = _get(f, "quality", "longmemeval")
    if lme:
        parts.append(
            "**LongMemEval** (oracle, 940 sessions as daily logs in one workspace, 470 questions, each at its own "
            "date)\n\n"
            + _table(
                ["mode", "recall_any@5", "recall_any@10", "nDCG@10", "MRR@10", "search p50 / p95"],
                [
                    [
                        MODE_NAMES[k],
                        _n(v["recall_any@5"]),
                        _n(v["recall_any@10"]),
                        _n(v["ndcg@10"]),
                        _n(v["mrr@10"]),
                        f"{v['latency_ms']['p50']:.0f} / {v['latency_ms']['p95']:.0f} ms",
                    ]
                    for k, v in lme.items()
                ],
            )
        )
        types = sorted(next(iter(lme.values()))["recall_any@10_by_type"])
        parts.append("recall_any@10 by question type\n\n" + _table(
            ["question type", *[MODE_NAMES[k].split(" (")[0] for k in lme]],
            [[t, *[_n(lme[k]["recall_any@10_by_type"].get(t)) for k in lme]] for t in types]))
    parts += _conversation_tables(f)
    parts += _time_tables(f)
    parts += _speed_tables(f)
    sc = {k: v for k, v in (_get(f, "scale") or {}).items() if k.isdigit()}
    if sc:
        sizes = sorted(sc, key=int)
        head = ["", *[f"{int(s):,} files ({sc[s]['chunks']:,} chunks)" for s in sizes]]

        def cells(fn) -> list[str]:
            out = []
            for s in sizes:
                try:
                    out.append(fn(sc[s]))
                except (KeyError, TypeError):
                    out.append("–")
            return out

        rows = [
            [
                "full index, keyword only",
                *cells(
                    lambda r: (
                        f"{r['memsift']['index_fts']['seconds']:.2f} s "
                        f"({r['memsift']['index_fts']['chunks_per_s']:,.0f} chunks/s)"
                    )
                ),
            ],
            [
                "full index, local model",
                *cells(
                    lambda r: (
                        f"{r['memsift']['index_local']['seconds']:.0f} s "
                        f"({r['memsift']['index_local']['chunks_per_s']:.0f} chunks/s)"
                    )
                ),
            ],
            ["QMD `collection add` (indexes)", *cells(lambda r: f"{r['qmd']['index']['seconds']:.2f} s")],
            [
                "no-change re-sync (memsift / `qmd update`)",
                *cells(
                    lambda r: (
                        f"{r['memsift']['resync_fts']['nochange_s'] * 1000:.0f} ms / "
                        f"{r['qmd']['resync']['nochange_s'] * 1000:.0f} ms"
                    )
                ),
            ],
            [
                "one file changed (memsift keyword / with model / `qmd update`)",
                *cells(
                    lambda r: (
                        f"{r['memsift']['resync_fts']['one_changed_s'] * 1000:.0f} / "
                        f"{r['memsift']['resync_local']['one_changed_s'] * 1000:.0f} / "
                        f"{r['qmd']['resync']['one_changed_s'] * 1000:.0f} ms"
                    )
                ),
            ],
            [
                "search in process, keyword (p50 / p95)",
                *cells(lambda r: "{p50_ms:.1f} / {p95_ms:.1f} ms".format(**r["memsift"]["search_in_process"]["fts"])),
            ],
            [
                "search in process, vector",
                *cells(
                    lambda r: "{p50_ms:.1f} / {p95_ms:.1f} ms".format(**r["memsift"]["search_in_process"]["vector"])
                ),
            ],
            [
                "search in process, hybrid",
                *cells(
                    lambda r: "{p50_ms:.1f} / {p95_ms:.1f} ms".format(**r["memsift"]["search_in_process"]["hybrid"])
                ),
            ],
            [
                "`memsift search` CLI, cold (p50 / p95)",
                *cells(lambda r: "{p50_ms:.0f} / {p95_ms:.0f} ms".format(**r["memsift"]["cli_search"])),
            ],
            [
                "`memsift search` CLI, `memsift watch` running",
                *cells(lambda r: "{p50_ms:.0f} / {p95_ms:.0f} ms".format(**r["memsift"]["cli_search_resident"])),
            ],
            [
                "`qmd search --json` CLI",
                *cells(lambda r: "{p50_ms:.0f} / {p95_ms:.0f} ms".format(**r["qmd"]["cli_search"])),
            ],
            [
                "→ QMD time ÷ memsift time: index / no-change / one file / CLI cold / CLI resident",
                *cells(
                    lambda r: " / ".join(
                        f"{r['ratios'][k]:.1f}×"
                        for k in (
                            "index_fts_vs_qmd_add",
                            "nochange_resync",
                            "one_changed_resync_fts",
                            "cli_search_p50",
                            "cli_search_resident_p50",
                        )
                    )
                ),
            ],
            [
                "peak RSS: index keyword / with model / QMD add",
                *cells(
                    lambda r: (
                        f"{r['memsift']['index_fts']['peak_rss_mb']:.0f} / "
                        f"{r['memsift']['index_local']['peak_rss_mb']:.0f} / {r['qmd']['index']['peak_rss_mb']:.0f} MB"
                    )
                ),
            ],
            [
                "peak RSS: CLI search cold / resident client / qmd",
                *cells(
                    lambda r: (
                        f"{r['memsift']['cli_search']['peak_rss_mb']:.0f} / "
                        f"{r['memsift']['cli_search_resident']['peak_rss_mb']:.0f} / "
                        f"{r['qmd']['cli_search']['peak_rss_mb']:.0f} MB"
                    )
                ),
            ],
            [
                "index on disk: keyword / with vectors / QMD",
                *cells(
                    lambda r: (
                        f"{r['memsift']['index_fts']['index_mb']:.1f} / {r['memsift']['index_local']['index_mb']:.1f} "
                        f"/ {r['qmd']['index_mb']:.1f} MB"
                    )
                ),
            ],
        ]
        parts.append(
            "**Speed and scale** (synthetic daily logs of 600–1,300 characters; every index built from nothing)\n\n"
            + _table(head, rows)
        )
    targets = f.get("targets") or []
    if targets:
        parts.append(
            "**Targets**\n\n"
            + _table(
                ["target", "measured", "met"],
                [[t["target"], t["shown"], {True: "yes", False: "**no**", None: "–"}[t["met"]]] for t in targets],
            )
        )
    return "\n\n".join(parts) + "\n"


# --- plots --------------------------------------------------------------------------------------


def plot_all(f: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    written: list[Path] = []

    def save(fig: Any, name: str) -> None:
        path = out / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    sf, lme = _get(f, "quality", "scifact"), _get(f, "quality", "longmemeval")
    if sf or lme:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, data, metric, target, title in (
            (axes[0], sf, "ndcg@10", 0.68, "SciFact test: nDCG@10"),
            (axes[1], lme, "recall_any@10", 0.75, "LongMemEval oracle: recall_any@10"),
        ):
            if not data:
                continue
            names = list(data)
            vals = [data[k][metric] for k in names]
            colors = ["#c44e52" if k == "qmd" else "#4c72b0" if k.startswith("hybrid") else "#8c8c8c" for k in names]
            ax.bar(range(len(names)), vals, color=colors)
            ax.set_xticks(range(len(names)), [k.replace("+", "\n+") for k in names])
            ax.axhline(target, color="black", linestyle="--", linewidth=1, label=f"target {target}")
            for i, v in enumerate(vals):
                ax.text(i, v + 0.01, f"{v:.3f}", ha="center", fontsize=8)
            ax.set_ylim(0, 1.05)
            ax.set_title(title)
            ax.legend(loc="upper right", fontsize=8)
        save(fig, "quality.png")

    sc = {int(k): v for k, v in (_get(f, "scale") or {}).items() if k.isdigit()}
    if sc:
        sizes = sorted(sc)

        def series(*path: str) -> tuple[list[int], list[float]]:
            xs, ys = [], []
            for s in sizes:
                v = _get(sc[s], *path)
                if v is not None:
                    xs.append(sc[s]["chunks"])
                    ys.append(v)
            return xs, ys

        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for label, path, style in (
            ("memsift, keyword only", ("memsift", "index_fts", "seconds"), "o-"),
            ("memsift, local model", ("memsift", "index_local", "seconds"), "s-"),
            ("QMD collection add", ("qmd", "index", "seconds"), "^--"),
        ):
            xs, ys = series(*path)
            if xs:
                ax.plot(xs, ys, style, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("chunks")
        ax.set_ylabel("full index, seconds")
        ax.set_title("Indexing from nothing")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        save(fig, "scale_index.png")

        fig, ax = plt.subplots(figsize=(10, 4.5))
        for label, path, style in (
            ("in process, keyword", ("memsift", "search_in_process", "fts"), "o-"),
            ("in process, vector", ("memsift", "search_in_process", "vector"), "o-"),
            ("in process, hybrid", ("memsift", "search_in_process", "hybrid"), "o-"),
            ("memsift search CLI, cold", ("memsift", "cli_search"), "s-"),
            ("memsift search CLI, watch running", ("memsift", "cli_search_resident"), "s-"),
            ("qmd search CLI", ("qmd", "cli_search"), "^--"),
        ):
            xs, p50 = series(*path, "p50_ms")
            _xs, p95 = series(*path, "p95_ms")
            if xs:
                line = ax.plot(xs, p50, style, label=f"{label} (p50; bar to p95)")[0]
                ax.vlines(xs, p50, p95, color=line.get_color(), alpha=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("chunks")
        ax.set_ylabel("milliseconds")
        ax.set_title("Search latency")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        save(fig, "scale_search.png")

        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for label, path in (
            ("index, keyword only", ("memsift", "index_fts", "peak_rss_mb")),
            ("index, local model", ("memsift", "index_local", "peak_rss_mb")),
            ("CLI search, cold", ("memsift", "cli_search", "peak_rss_mb")),
            ("QMD collection add", ("qmd", "index", "peak_rss_mb")),
            ("qmd search", ("qmd", "cli_search", "peak_rss_mb")),
        ):
            xs, ys = series(*path)
            if xs:
                axes[0].plot(xs, ys, "o-", label=label)
        for label, path in (
            ("memsift, keyword only", ("memsift", "index_fts", "index_mb")),
            ("memsift, with vectors", ("memsift", "index_local", "index_mb")),
            ("QMD", ("qmd", "index_mb")),
        ):
            xs, ys = series(*path)
            if xs:
                axes[1].plot(xs, ys, "o-", label=label)
        for ax, title, unit in ((axes[0], "Peak memory (RSS)", "MB"), (axes[1], "Index size on disk", "MB")):
            ax.set_xscale("log")
            ax.set_xlabel("chunks")
            ax.set_ylabel(unit)
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        axes[1].set_yscale("log")
        save(fig, "scale_memory.png")
    return written
