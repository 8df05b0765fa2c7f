"""The report's plots (matplotlib Agg; no torch, no pyplot state): each function returns a Figure."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from cudagraph_bench import variants
from cudagraph_bench.cases import Case
from cudagraph_bench.errors import UsageError
from cudagraph_bench.report.launch_data import LaunchRow
from cudagraph_bench.report.runs import variant_order

#: One fixed colour per forward variant (in the registry's display order), so every plot uses the same legend.
VARIANT_COLORS = dict(zip(variants.FORWARD_NAMES, ("tab:gray", "tab:blue", "tab:orange", "tab:purple", "tab:green",
                                                   "tab:red")))
#: The gate's default target: graph replay cuts median latency by >= 30%, i.e. a speedup of 1/0.7.
DEFAULT_TARGET_REDUCTION = 0.30
LATENCY_LABEL = "latency per forward pass (ms)"
LENGTH_LABEL = "prompt length (tokens)"


def _panel_figure(pairs) -> tuple:
    """``(fig, [(axes, (model, dtype))])``: one axes per distinct pair, sorted, up to 2 columns, unused cells hidden."""
    from matplotlib.figure import Figure

    panels = sorted(set(pairs))
    ncols = 1 if len(panels) == 1 else 2
    nrows = -(-len(panels) // ncols)
    fig = Figure(figsize=(7.0 * ncols, 4.2 * nrows), layout="constrained")
    grid = list(fig.subplots(nrows, ncols, squeeze=False).ravel())
    for ax in grid[len(panels):]:
        ax.set_visible(False)
    return fig, list(zip(grid, panels))


def _plain_log_ticks(axis) -> None:
    """``0.5``, ``2``, ``10`` instead of ``5x10^-1`` on a log axis."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda _x, _pos: ""))


def _length_panel(ax, lengths: list[int], title: str) -> None:
    """Prompt lengths on a log2 x axis (one labelled tick per length), the panel's title and its legend."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.minorticks_off()
    ax.set(xlabel=LENGTH_LABEL, title=title)
    ax.legend(fontsize="small")


def _suptitle(fig, what: str, gpu: str | None) -> None:
    fig.suptitle(f"{what}, batch 1" + (f", {gpu}" if gpu else ""))


def latency_comparison(samples_ms: Mapping[Case, Sequence[float]], *, gpu: str | None = None):
    """Latency distribution per variant from per-round ``samples_ms`` ``[rounds]`` (ms): a histogram per variant for one
    prompt length, else box plots; one axes per (model, dtype). ValueError when ``samples_ms`` is empty."""
    if not samples_ms:
        raise ValueError("no forward measurements to plot")
    fig, panels = _panel_figure((c.model, c.dtype) for c in samples_ms)
    for ax, (model, dtype) in panels:
        cases = {c: np.asarray(v, dtype=float) for c, v in samples_ms.items() if (c.model, c.dtype) == (model, dtype)}
        variants = sorted({c.variant for c in cases}, key=variant_order)
        lengths = sorted({c.seq_len for c in cases})
        if len(lengths) == 1:
            _histograms(ax, cases, variants)
            ax.set_title(f"{model} {dtype}, prompt {lengths[0]} tokens")
        else:
            _boxes(ax, cases, variants, lengths)
            ax.set_title(f"{model} {dtype}")
    _suptitle(fig, "Forward-pass latency distribution", gpu)
    return fig


def _histograms(ax, cases: dict, variants: list[str]) -> None:
    from matplotlib.ticker import MaxNLocator

    values = np.concatenate(list(cases.values()))
    lo, hi = float(values.min()), float(values.max())
    log = hi / max(lo, 1e-9) > 8
    bins = np.geomspace(lo, hi, 60) if log and lo > 0 else np.linspace(lo, hi if hi > lo else lo + 1e-3, 60)
    for variant in variants:
        data = np.concatenate([v for c, v in cases.items() if c.variant == variant])
        ax.hist(data, bins=bins, alpha=0.6, color=VARIANT_COLORS.get(variant), label=variant)
    if log:
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis)
    ax.set(xlabel=LATENCY_LABEL, ylabel="rounds (count)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))         # a count of rounds: whole numbers only
    ax.legend(title="variant")


def _boxes(ax, cases: dict, variants: list[str], lengths: list[int]) -> None:
    from matplotlib.patches import Patch

    by_key = {(c.seq_len, c.variant): v for c, v in cases.items()}
    width = 0.8 / len(variants)
    for j, variant in enumerate(variants):      # each variant has a sample at one length at least
        present = [(i, by_key[(n, variant)]) for i, n in enumerate(lengths) if (n, variant) in by_key]
        color = VARIANT_COLORS.get(variant, "black")
        ax.boxplot([sample for _, sample in present], positions=[i - 0.4 + width * (j + 0.5) for i, _ in present],
                   widths=width * 0.9, patch_artist=True, showfliers=True, boxprops={"facecolor": color, "alpha": 0.6},
                   medianprops={"color": "black", "gid": f"median:{variant}"},
                   flierprops={"markersize": 2, "markeredgecolor": color})
    ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
    ax.set(xlim=(-0.6, len(lengths) - 0.4), yscale="log", xlabel=LENGTH_LABEL, ylabel=LATENCY_LABEL)
    _plain_log_ticks(ax.yaxis)
    ax.grid(True, axis="y", which="major", alpha=0.3)
    ax.legend(handles=[Patch(facecolor=VARIANT_COLORS.get(v, "black"), alpha=0.6, label=v) for v in variants],
              title="variant", fontsize="small")


def speedup_vs_length(medians_ms: Mapping[Case, float], *, gpu: str | None = None,
                      target_reduction: float | None = DEFAULT_TARGET_REDUCTION):
    """Speedup over eager (``eager median / variant median``) against prompt length (log2), one axes per (model, dtype)
    with eager medians, a line per variant broken where it has no median; ``target_reduction``: a dashed line at ``1 /
    (1 - target_reduction)``. ValueError when no case has an eager median."""
    eager = {c.without_variant(): m for c, m in medians_ms.items() if c.variant == variants.FORWARD_REFERENCE}
    usable = {c: m for c, m in medians_ms.items() if c.without_variant() in eager and m > 0}
    if not eager:
        raise ValueError("no eager medians: the speedup plot needs the eager variant")
    fig, panels = _panel_figure((c.model, c.dtype) for c in usable)
    for ax, (model, dtype) in panels:
        cases = {c: m for c, m in usable.items() if (c.model, c.dtype) == (model, dtype)}
        lengths = sorted({c.seq_len for c in cases})
        for variant in sorted({c.variant for c in cases}, key=variant_order):
            speedup = {c.seq_len: eager[c.without_variant()] / m for c, m in cases.items() if c.variant == variant}
            # a length this variant lacks (failed, skipped) breaks its line instead of being bridged
            ys = [speedup.get(n, float("nan")) for n in lengths]
            ax.plot(lengths, ys, marker="o", color=VARIANT_COLORS.get(variant), label=variant,
                    linestyle="--" if variant == variants.FORWARD_REFERENCE else "-")
        if target_reduction is not None:
            ax.axhline(1.0 / (1.0 - target_reduction), color="black", linewidth=0.8, linestyle=":",
                       label=f"target: {target_reduction:.0%} lower median latency")
        _length_panel(ax, lengths, f"{model} {dtype}")
        ax.set(ylabel="speedup vs eager (x, ratio of medians)", ylim=(0, None))
        ax.grid(True, alpha=0.3)
    _suptitle(fig, "Speedup over eager vs prompt length", gpu)
    return fig


# --------------------------------------------------------------------------------------- launch overhead

#: Resolution of every PNG (dots per inch), as :func:`cudagraph_bench.fsio.save_figure` writes it.
PLOT_DPI = 120


def speedup_figure(series: dict[str, list[LaunchRow]]):
    """Left, speedup vs N launches; right, µs per launch vs N (log2 x); ``series``: label -> rows, incomplete rows
    skipped. UsageError when no series has a complete row."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plotted = {label: kept for label, rows in series.items() if (kept := [r for r in rows if r.speedup is not None])}
    if not plotted:
        raise UsageError("nothing to plot: no N measured with both loop and graph variants")
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_s, ax_us = fig.subplots(1, 2)
    for label, rows in plotted.items():
        ns = [r.n_launches for r in rows]
        ax_s.plot(ns, [r.speedup for r in rows], marker="o", label=label)
        line = ax_us.plot(ns, [r.us_per_launch_loop for r in rows], marker="o", label=f"{label} loop")[0]
        ax_us.plot(ns, [r.us_per_launch_graph for r in rows], marker="s", linestyle="--",
                   color=line.get_color(), label=f"{label} graph")
    ax_s.axhline(1.0, color="grey", linewidth=0.8, linestyle=":", label="no gain (1×)")
    all_n = sorted({r.n_launches for rows in plotted.values() for r in rows})
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    for ax in (ax_s, ax_us):
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_n)
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("launches per sequence N (log scale)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    ax_us.set(yscale="log", ylabel="overhead per launch (µs, log scale)", title="launch overhead per kernel")
    _plain_log_ticks(ax_us.yaxis)
    ax_s.set(ylabel="speedup: loop time / graph replay time (×)", title="graph replay speedup vs N")
    return fig


# --------------------------------------------------------------------------------------------- roofline

#: One fixed colour per decode variant (the first three of the registry's display order; the others black).
DECODE_VARIANT_COLORS = dict(zip(variants.DECODE_NAMES, ("tab:gray", "tab:orange", "tab:blue")))


def busy_vs_length(rows: Sequence[dict], *, gpu: str | None = None):
    """Eager and graph medians and GPU busy time (dashed) vs prompt length (log2), ms (log), one panel per (model,
    dtype). ValueError when ``rows`` is empty."""
    if not rows:
        raise ValueError("no forward case with a GPU busy time to plot")
    fig, panels = _panel_figure((r["model"], r["dtype"]) for r in rows)
    for ax, (model, dtype) in panels:
        panel = sorted((r for r in rows if (r["model"], r["dtype"]) == (model, dtype)), key=lambda r: r["seq_len"])
        lengths = [r["seq_len"] for r in panel]
        for key, label, color, style in (
                ("eager_median_ms", "eager median", VARIANT_COLORS[variants.FORWARD_REFERENCE], "-"),
                ("graph_median_ms", "graph median", VARIANT_COLORS[variants.GATED], "-"),
                ("busy_ms", "GPU busy (sum of kernel times)", "black", "--")):
            ys = [r[key] if r.get(key) is not None else float("nan") for r in panel]
            ax.plot(lengths, ys, marker="o", color=color, linestyle=style, label=label)
        _length_panel(ax, lengths, f"{model} {dtype}")
        ax.set(yscale="log", ylabel=LATENCY_LABEL)
        _plain_log_ticks(ax.yaxis)
        ax.grid(True, which="major", alpha=0.3)
    _suptitle(fig, "GPU busy time vs latency", gpu)
    return fig


def decode_bandwidth(rows: Sequence[dict], *, gpu: str | None = None):
    """One horizontal bar of achieved GB/s per decode benchmark, a dashed line at each distinct peak. ValueError when no
    row has an achieved bandwidth."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rows = [r for r in rows if r.get("achieved_gbps") is not None]
    if not rows:
        raise ValueError("no decode benchmark with an achieved bandwidth to plot")
    fig = Figure(figsize=(9, 1.5 + 0.32 * len(rows)), layout="constrained")
    ax = fig.subplots()
    labels = [f"{r['model']} {r['dtype']} L={r['seq_len']} new={r['new_tokens']} {r['variant']}" for r in rows]
    ys = list(range(len(rows)))[::-1]
    ax.barh(ys, [r["achieved_gbps"] for r in rows],
            color=[DECODE_VARIANT_COLORS.get(r["variant"], "black") for r in rows])
    ax.set_yticks(ys, labels, fontsize="small")
    for peak, source in sorted({(r["peak_gbps"], r["peak_source"]) for r in rows if r.get("peak_gbps")}):
        ax.axvline(peak, color="black", linestyle="--", linewidth=1.0, label=f"peak {peak:.0f} GB/s ({source})")
    handles = [Patch(color=c, label=v) for v, c in DECODE_VARIANT_COLORS.items()
               if any(r["variant"] == v for r in rows)]
    ax.legend(handles=handles + ax.get_legend_handles_labels()[0], fontsize="small", loc="lower right")
    ax.set_xlabel("achieved memory bandwidth (GB/s): bytes per token / time per token")
    ax.grid(True, axis="x", alpha=0.3)
    _suptitle(fig, "Decode memory bandwidth vs peak", gpu)
    return fig
