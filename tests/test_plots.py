"""Plots from run data: files are PNGs, axes carry units, one series per variant, values from the JSON."""

import statistics

import numpy as np
import pytest

from cudagraph_bench.report import plots
from cudagraph_bench.cases import Case
from cudagraph_bench.fsio import save_figure

from h200_fixture import FIXTURE, read_json

pytestmark = pytest.mark.transformers_free

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fixture_samples():
    doc = read_json(FIXTURE)
    return {Case.from_extra_info(b["extra_info"]): np.asarray(b["stats"]["data"]) * 1e3
            for b in doc["benchmarks"] if b["extra_info"].get("suite") == "forward"}


def synthetic(lengths=(16, 64, 256), variants=("eager", "graph", "compile", "compile+graph"), seed=0):
    """Made-up samples (ms) for one model/dtype: enough structure to plot, no real measurement."""
    rng = np.random.default_rng(seed)
    base = {"eager": 8.0, "graph": 2.0, "compile": 1.5, "compile+graph": 1.2}
    return {Case("gpt2", "float32", n, v): rng.normal(base[v] * (1 + n / 512), 0.05, size=40)
            for n in lengths for v in variants}


def visible_axes(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def legend_labels(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_latency_comparison_has_one_panel_per_model_dtype_with_units():
    samples = fixture_samples()
    fig = plots.latency_comparison(samples, gpu="NVIDIA H200")
    panels = sorted({(c.model, c.dtype) for c in samples})
    axes = visible_axes(fig)
    assert [ax.get_title() for ax in axes] == [f"{m} {d}" for m, d in panels]
    for ax, (model, dtype) in zip(axes, panels):
        assert "(ms)" in ax.get_ylabel() and "(tokens)" in ax.get_xlabel()
        present = {c.variant for c in samples if (c.model, c.dtype) == (model, dtype)}
        assert sorted(legend_labels(ax)) == sorted(present)
        lengths = sorted({c.seq_len for c in samples if (c.model, c.dtype) == (model, dtype)})
        assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in lengths]
    assert "NVIDIA H200" in fig._suptitle.get_text()


def test_latency_comparison_draws_one_box_per_variant_and_length_at_the_median():
    samples = synthetic()
    (ax,) = visible_axes(plots.latency_comparison(samples))
    assert legend_labels(ax) == ["eager", "graph", "compile", "compile+graph"]
    # boxplot median lines: one per (variant, length), at the sample medians
    for variant in ("eager", "graph", "compile", "compile+graph"):
        lines = [line for line in ax.lines if line.get_gid() == f"median:{variant}"]
        assert [line.get_ydata()[0] for line in lines] == pytest.approx(
            [float(np.median(samples[Case("gpt2", "float32", n, variant)])) for n in (16, 64, 256)])


def test_single_length_gives_histograms_per_variant():
    samples = synthetic(lengths=(50,), variants=("eager", "graph"))
    (ax,) = visible_axes(plots.latency_comparison(samples, gpu="X"))
    assert "(ms)" in ax.get_xlabel() and "rounds" in ax.get_ylabel()
    assert legend_labels(ax) == ["eager", "graph"]
    assert "50 tokens" in ax.get_title()
    # every round of both variants is counted once
    total = sum(p.get_height() for p in ax.patches)
    assert total == sum(len(v) for v in samples.values())


def test_a_histogram_counts_rounds_in_whole_numbers():
    """Few rounds (a short run) leave the default ticks at 0.5 steps; a count of rounds has whole-number ticks."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    samples = {Case("gpt2", "float32", 50, v): np.array(d) for v, d in (("eager", [8.0, 8.1, 8.3]),
                                                                       ("graph", [2.0, 2.1, 2.05]))}
    fig = plots.latency_comparison(samples)
    FigureCanvasAgg(fig).draw()
    (ax,) = visible_axes(fig)
    ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
    assert len(ticks) >= 2 and all(t == int(t) for t in ticks), ticks


def test_speedup_vs_length_lines_are_eager_over_variant_medians():
    samples = fixture_samples()
    medians = {c: statistics.median(v.tolist()) for c, v in samples.items()}
    fig = plots.speedup_vs_length(medians, gpu="NVIDIA H200")
    axes = visible_axes(fig)
    assert len(axes) == len({(c.model, c.dtype) for c in samples})
    for ax in axes:
        model, dtype = ax.get_title().split()
        assert ax.get_xscale() == "log" and "(tokens)" in ax.get_xlabel() and "speedup" in ax.get_ylabel()
        series = {line.get_label(): line for line in ax.lines if line.get_label() in ("eager", "graph")}
        assert set(series) == {"eager", "graph"}
        xs = list(series["graph"].get_xdata())
        expected = [medians[Case(model, dtype, n, "eager")] / medians[Case(model, dtype, n, "graph")] for n in xs]
        assert list(series["graph"].get_ydata()) == pytest.approx(expected)
        assert list(series["eager"].get_ydata()) == pytest.approx([1.0] * len(xs))
        assert xs == sorted({c.seq_len for c in samples if (c.model, c.dtype) == (model, dtype)})


def test_speedup_has_one_series_per_variant_plus_the_target():
    medians = {c: float(np.median(v)) for c, v in synthetic().items()}
    (ax,) = visible_axes(plots.speedup_vs_length(medians, target_reduction=0.3))
    labels = [line.get_label() for line in ax.lines]
    assert labels[:4] == ["eager", "graph", "compile", "compile+graph"]
    target = [line for line in ax.lines if line.get_label().startswith("target")]
    assert len(target) == 1 and target[0].get_ydata()[0] == pytest.approx(1 / 0.7)


def test_speedup_line_breaks_where_a_variant_has_no_median():
    medians = {Case("gpt2", "float32", n, "eager"): 10.0 for n in (16, 50, 128)}
    medians.update({Case("gpt2", "float32", 16, "compile+graph"): 2.0, Case("gpt2", "float32", 128, "compile+graph"): 5.0})
    (ax,) = visible_axes(plots.speedup_vs_length(medians))
    (line,) = [ln for ln in ax.lines if ln.get_label() == "compile+graph"]
    assert list(line.get_xdata()) == [16, 50, 128]
    ys = list(line.get_ydata())
    assert ys[0] == pytest.approx(5.0) and np.isnan(ys[1]) and ys[2] == pytest.approx(2.0)


def test_speedup_needs_eager_and_latency_needs_data():
    with pytest.raises(ValueError, match="eager"):
        plots.speedup_vs_length({Case("gpt2", "float32", 16, "graph"): 1.0})
    with pytest.raises(ValueError, match="no forward"):
        plots.latency_comparison({})


def test_save_figure_writes_a_png_atomically(tmp_path):
    fig = plots.latency_comparison(synthetic())
    path = save_figure(fig, tmp_path / "sub" / "latency.png")
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert [p.name for p in path.parent.iterdir()] == ["latency.png"]
