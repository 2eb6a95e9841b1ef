"""The plot tool's answer and its PNG (issue 26): over MCP a resource link to the PNG kept in server memory (read
with resources/read; bounded, LRU, expiring), the image inline only with ``inline``, no file written anywhere;
the figure: log y for a series spanning more than two decades, the legend outside the panels, each finding's
onset on its own series' panel, several runs overlaid one line each; ``plot --png`` without matplotlib exits 2."""
from __future__ import annotations

import base64
import glob
import math
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from grpo_debug.server.plot_store import PREFIX, PlotStore

STORES = Path(__file__).parent / "data" / "stores"
PNG_SIG = b"\x89PNG\r\n\x1a\n"


def _log(climb_at: int | None = None, lo: float = 1.0, n: int = 60, seed: int = 0) -> str:
    """A verl console log: grad_norm flat near ``lo`` then (``climb_at``) growing 30 %/step; entropy falling."""
    import random

    rnd = random.Random(seed)
    out = ["python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.rollout.n=8"]
    for s in range(1, n + 1):
        g = lo * (1.0 + 0.02 * rnd.random())
        if climb_at and s >= climb_at:
            g *= 1.3 ** (s - climb_at + 1)
        out.append(f"step:{s} - actor/grad_norm:{g:.6g} - actor/entropy:{1.2 - 0.005 * s + 0.001 * rnd.random():.4f}")
    return "\n".join(out) + "\n"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIG
    return struct.unpack(">II", data[16:24])


def _blocks(r) -> dict[str, list]:
    out: dict[str, list] = {}
    for b in r.content:
        out.setdefault(b.type, []).append(b)
    return out


# ---- over MCP

@pytest.mark.anyio
async def test_default_answer_is_text_and_a_link_the_client_reads_back_as_the_png():
    pytest.importorskip("matplotlib")
    from mcp import Client

    from grpo_debug.server.app import build_server

    async with Client(build_server(allowed_roots=[STORES])) as c:
        templates = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
        r = await c.call_tool("plot", {"path": str(STORES / "tensorboard")})
        assert not r.is_error and r.structured_content is None
        got = _blocks(r)
        assert set(got) == {"text", "resource_link"}, [b.type for b in r.content]  # no image by default
        assert "grad_norm" in got["text"][0].text and "▁" in got["text"][0].text  # the sparklines
        ln = got["resource_link"][0]
        assert ln.uri.startswith(PREFIX) and ln.mime_type == "image/png" and "30 min" in ln.description
        res = await c.read_resource(ln.uri)
    assert "grpo-debug://plot/{id}" in templates
    (item,) = res.contents
    data = base64.b64decode(item.blob)
    w, h = _png_size(data)
    assert item.mime_type == "image/png" and len(data) == ln.size and 10_000 < len(data) < 1_000_000
    assert w <= 1200 and h <= 800
    answer = sum(len(getattr(b, "text", "") or "") + len(getattr(b, "description", "") or "") for b in r.content)
    assert answer < 3000, answer  # today's inline answer carried 110-180k characters of base64


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_stateless_http_client_reads_the_link_in_a_later_request(tmp_path, serve_http):
    """Over stateless HTTP (2026-07-28 client) every request is its own session: the link still reads back."""
    pytest.importorskip("matplotlib")
    import warnings

    from mcp import Client

    (tmp_path / "run.log").write_text(_log(climb_at=30))
    with serve_http("--stateless", "--allow", str(tmp_path)) as (port, _):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="2026-07-28") as c:
                r = await c.call_tool("plot", {"path": str(tmp_path / "run.log")})
                got = _blocks(r)
                assert set(got) == {"text", "resource_link"}, r.content
                res = await c.read_resource(got["resource_link"][0].uri)
    assert base64.b64decode(res.contents[0].blob)[:8] == PNG_SIG
    assert not list(tmp_path.rglob("*.png"))


@pytest.mark.anyio
async def test_inline_true_returns_the_image_too_and_it_is_the_linked_one():
    pytest.importorskip("matplotlib")
    from mcp import Client

    from grpo_debug.server.app import build_server

    async with Client(build_server(allowed_roots=[STORES])) as c:
        r = await c.call_tool("plot", {"path": str(STORES / "mlflow"), "metrics": ["grad_norm"], "inline": True})
        got = _blocks(r)
        linked = base64.b64decode((await c.read_resource(got["resource_link"][0].uri)).contents[0].blob)
    (img,) = got["image"]
    assert img.mime_type == "image/png" and base64.b64decode(img.data) == linked and linked[:8] == PNG_SIG


@pytest.mark.anyio
async def test_the_store_bound_evicts_and_a_dropped_link_says_to_plot_again():
    pytest.importorskip("matplotlib")
    from mcp import Client

    from grpo_debug.server.app import build_server

    server = build_server(allowed_roots=[STORES])
    server.plot_store.max_images = 2
    async with Client(server) as c:
        uris = []
        for kind in ("mlflow", "verl", "tensorboard"):
            r = await c.call_tool("plot", {"path": str(STORES / kind), "metrics": ["grad_norm"]})
            uris.append(_blocks(r)["resource_link"][0].uri)
        assert len(set(uris)) == 3 and len(server.plot_store) == 2
        for u in uris[1:]:
            assert (await c.read_resource(u)).contents[0].blob
        with pytest.raises(Exception, match="call plot again"):
            await c.read_resource(uris[0])
        with pytest.raises(Exception, match="call plot again"):
            await c.read_resource(PREFIX + "not-an-id")


def test_plot_store_lru_byte_bound_and_expiry():
    now = [0.0]
    st = PlotStore(max_images=3, max_bytes=1000, ttl_s=60, clock=lambda: now[0])
    a, b, c = st.put(b"a" * 100), st.put(b"b" * 100), st.put(b"c" * 100)
    assert st.get(a) == b"a" * 100  # a is now the most recently used
    d = st.put(b"d" * 100)
    assert st.get(b) is None and all(st.get(k) for k in (a, c, d))  # b was the least recently used
    e = st.put(b"e" * 950)  # over the byte bound with any other: the oldest go until it fits
    assert st.get(e) and st.nbytes <= 1000 and len(st) == 1
    now[0] = 61.0
    assert st.get(e) is None and len(st) == 0  # expired
    with pytest.raises(ValueError, match="exceeds"):
        st.put(b"x" * 1001)
    assert len({PlotStore().put(b"p") for _ in range(50)}) == 50  # ids never repeat (128 random bits)


@pytest.mark.anyio
async def test_no_file_is_written_anywhere_by_the_mcp_tool(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from mcp import Client

    from grpo_debug.server.app import build_server
    from grpo_debug.tools.rundir import plot

    def old_pngs() -> set[str]:  # where the tool wrote before (a grpo-debug-plot-* folder in the temp folder)
        return set(glob.glob(os.path.join(tempfile.gettempdir(), "grpo-debug-plot-*", "*")))

    before = old_pngs()
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))  # this process's temp folder: must stay empty
    writes = []
    monkeypatch.setattr(plot, "save_png", lambda *a, **k: writes.append(a))  # (in-process calls only)
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text(_log(climb_at=30))
    listing = sorted(os.listdir(run))
    async with Client(build_server(allowed_roots=[tmp_path])) as c:
        for inline in (False, True):
            r = await c.call_tool("plot", {"path": str(run), "inline": inline})
            assert not r.is_error, r.content
    monkeypatch.undo()
    assert not writes and sorted(os.listdir(run)) == listing and not os.listdir(private)
    assert old_pngs() <= before
    assert not list(tmp_path.rglob("*.png"))


# ---- the figure

def _series(name: str, values: list[float], axis: str = "step"):
    return NS(name=name, axis=axis, raw_keys=[name], points=[NS(step=float(i + 1), value=v) for i, v in
                                                             enumerate(values)])


def test_log_scale_only_where_a_series_spans_more_than_two_decades():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from grpo_debug.tools.rundir.plot_render import Trace, build_figure, y_scale

    wide = [1e-3 * 10 ** (4 * i / 49) for i in range(50)]  # 1e-3 .. 10
    narrow = [1.0 + 40 * i / 49 for i in range(50)]  # 1 .. 41: 1.6 decades
    zeros = [0.0] * 10 + wide  # zeros and a wide positive span: symlog
    fig = build_figure([(n, [Trace(_series(n, v))]) for n, v in (("kl", wide), ("loss", narrow), ("z", zeros))])
    try:
        scales = {ax.get_title().split(" ")[0]: ax.get_yscale() for ax in fig.axes if ax.get_visible()}
    finally:
        plt.close(fig)
    assert scales == {"kl": "log", "loss": "linear", "z": "symlog"}, scales
    assert y_scale([0.5, 50.0]) == ("linear", None) and y_scale([0.5, 50.1])[0] == "log"  # the bound: 100x
    assert y_scale([float("nan"), 1e-4, 1.0])[0] == "log"  # non-finite values do not count


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_legend_is_outside_every_panel():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from grpo_debug.tools.rundir.plot_render import Trace, build_figure

    panels = [(n, [Trace(_series(n, [float(i % 5 + k) for i in range(40)]), run, [("grad_norm_spike", 20.0)], ci)
                   for ci, run in enumerate(("run A", "run B"))]) for k, n in enumerate(("a", "b", "c", "d", "e"))]
    fig = build_figure(panels, title="two runs")
    try:
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        (leg,) = fig.legends
        lb = leg.get_window_extent(r)
        boxes = [ax.get_window_extent(r) for ax in fig.axes if ax.get_visible()]
        labels = [t.get_text() for t in leg.get_texts()]
        fw, fh = fig.get_size_inches() * fig.dpi
    finally:
        plt.close(fig)
    assert len(boxes) == 5 and not any(_overlaps(lb, b) for b in boxes)
    assert lb.x1 <= fw + 1 and lb.y0 >= 0 and fw <= 1200 and fh <= 800  # inside the image, beside the panels
    assert labels[:2] == ["run A", "run B"] and "run B: grad_norm_spike @ 20" in labels


def _vlines(ax, ls: str = "--") -> list[float]:
    return [ln.get_xdata()[0] for ln in ax.get_lines() if ln.get_linestyle() == ls
            and len(set(ln.get_xdata())) == 1]


def test_onset_marked_at_its_step_on_its_own_series_panel_only():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from grpo_debug.tools.rundir.plot import prepare
    from grpo_debug.tools.rundir.plot_render import build_figure

    runs, _, panels, _ = prepare(text=_log(climb_at=35))
    spike = next(f for f in runs[0].analysis.result.findings if f.symptom == "grad_norm_spike")
    assert spike.onset is not None and spike.onset.series == "grad_norm" and abs(spike.onset.step - 35) <= 2
    fig = build_figure(panels)
    try:
        by = {ax.get_title().split(" ")[0]: ax for ax in fig.axes if ax.get_visible()}
        onsets = {f.onset.step for f in runs[0].analysis.result.findings if f.onset and f.onset.series == "grad_norm"}
        assert set(_vlines(by["grad_norm"])) == onsets
        assert spike.onset.step not in _vlines(by["entropy"])  # another series' onset is not drawn there
    finally:
        plt.close(fig)


def test_two_paths_overlay_one_line_per_run_named_in_the_legend(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from grpo_debug.tools.rundir.plot import plot_run, prepare
    from grpo_debug.tools.rundir.plot_render import build_figure

    (tmp_path / "good.log").write_text(_log(seed=1))
    (tmp_path / "bad.log").write_text(_log(climb_at=30, seed=2))
    runs, how, panels, _ = prepare(path=str(tmp_path / "good.log"), also=[str(tmp_path / "bad.log")])
    assert [r.name for r in runs] == ["good.log", "bad.log"] and how == "2 inputs"
    fig = build_figure(panels)
    try:
        ax = next(a for a in fig.axes if a.get_title().startswith("grad_norm"))
        solid = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert len(solid) == 2 and len({ln.get_color() for ln in solid}) == 2
        assert [ln.get_label() for ln in solid] == ["good.log", "bad.log"] and labels[:2] == ["good.log", "bad.log"]
        assert max(solid[1].get_ydata()) > 100 * max(solid[0].get_ydata())  # the climbing run is the second
    finally:
        plt.close(fig)
    out = plot_run(path=str(tmp_path / "good.log"), also=[str(tmp_path / "bad.log")], png=False)
    rows = out.text.splitlines()
    assert rows[0].startswith("2 runs overlaid") and any(r.startswith("grad_norm[bad.log]") for r in rows)
    assert any(r.startswith("[bad.log] findings start at grad_norm_spike") for r in rows)
    assert not any(r.startswith("[good.log] findings") and "grad_norm_spike" in r for r in rows)


def test_a_labelled_paste_of_two_runs_is_overlaid():
    from grpo_debug.tools.rundir.plot import prepare

    a = "".join(f"[A] {ln}\n" for ln in _log(seed=3).splitlines())
    b = "".join(f"[B] {ln}\n" for ln in _log(climb_at=30, seed=4).splitlines())
    runs, how, panels, _ = prepare(text=a + b)
    assert len(runs) == 2 and "split from the paste" in how
    gn = dict(panels)["grad_norm"]
    assert len(gn) == 2 and {t.run for t in gn} == {r.name for r in runs}
    assert all(math.isfinite(p.value) for t in gn for p in t.series.points)


def test_a_sweep_folder_is_overlaid_one_run_per_sub_folder(tmp_path):
    from grpo_debug.tools.rundir.plot import plot_run

    for i, climb in ((1, None), (2, 30)):
        (tmp_path / f"seed{i}").mkdir()
        (tmp_path / f"seed{i}" / "train.log").write_text(_log(climb_at=climb, seed=i).replace("lr=1e-6", f"lr={i}e-6"))
    out = plot_run(path=str(tmp_path), png=False)
    assert out.runs == ["seed1", "seed2"] and out.series[0] == "grad_norm"
    rows = out.text.splitlines()
    assert "one per log or run folder" in rows[0] and rows[1].startswith("[seed2] findings start at grad_norm_spike")
    assert sum(r.startswith("grad_norm[seed") for r in rows) == 2


# ---- the CLI without matplotlib

def test_cli_png_without_matplotlib_exits_2_with_the_install_line(tmp_path):
    png = tmp_path / "out.png"
    code = ("import sys; sys.modules['matplotlib'] = None\n"  # import matplotlib now raises ImportError
            "from grpo_debug.server.cli import main\n"
            f"sys.exit(main(['plot', {str(STORES / 'mlflow')!r}, '--png', {str(png)!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr[-800:])
    assert "pip install 'grpo-debug[plot]'" in r.stderr and "--png" in r.stderr and not png.exists()
    ok = subprocess.run([sys.executable, "-c", code.replace(", '--png', " + repr(str(png)), "")],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "grad_norm" in ok.stdout, ok.stderr[-800:]  # sparklines need no matplotlib
