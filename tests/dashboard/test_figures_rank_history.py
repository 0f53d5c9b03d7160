"""The Ranking and History builders, and the checks every address goes through, on small frames."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from demuxlab.dashboard import address, fields, style
from demuxlab.dashboard.figures import history, ranking
from demuxlab.point import POINT_FIELDS
from helpers.dashboard_frames import points, preds, scaled


def speed(pattern: str, notifier: str, threads: int) -> float:
    base = {"hsha": 60_000.0, "lf": 70_000.0, "reactor": 50_000.0}[pattern]
    return base * (0.8 if notifier == "select" else 1.0) * min(threads, 4) / 4


def test_ranking_orders_designs_at_their_best_thread_count() -> None:
    pts = points(patterns=("hsha", "lf", "reactor"), mean=speed)
    table = ranking.ranking_table(pts)
    assert list(table["rank"]) == [1, 2, 3, 4, 5, 6]
    top = table.iloc[0]
    assert (top["pattern"], top["notifier"], top["share_of_best_pct"], top["differs_from_best"]) == (
        "lf",
        "epoll-lt",
        100.0,
        "best",
    )
    assert top["threads"] in (4, 8)  # 4 and 8 threads measure alike: the better of the two
    hsha = table[(table["pattern"] == "hsha") & (table["notifier"] == "epoll-lt")].iloc[0]
    assert hsha["share_of_best_pct"] == pytest.approx(100 * 60 / 70, abs=0.2)
    assert hsha["differs_from_best"] == "yes" and hsha["p_vs_best"] < 0.05  # Welch, 1 % noise
    assert hsha["latency_p50_us"] == 5.0 * hsha["threads"]
    assert table["workload"].nunique() == 1 and "10 µs · 64 conn" in table["workload"].iloc[0]
    # Two designs within noise of each other are not "different".
    twin = points(patterns=("hsha", "lf"), notifiers=("epoll-lt",), mean=lambda p, n, t: 1000.0 + (p == "lf"))
    assert ranking.ranking_table(twin).iloc[1]["differs_from_best"] == "no"


def test_ranking_puts_the_models_rank_beside_and_keeps_builds_apart() -> None:
    pts = points(patterns=("hsha", "lf"), mean=speed)
    pr = preds(pts)
    pr.loc[[p in set(pts[pts["pattern"] == "hsha"]["point_id"]) for p in pr["point_id"]], "predicted"] *= 3
    table = ranking.ranking_table(pts, pr, source="paper")
    lf = table[(table["pattern"] == "lf") & (table["notifier"] == "epoll-lt")].iloc[0]
    hs = table[(table["pattern"] == "hsha") & (table["notifier"] == "epoll-lt")].iloc[0]
    assert (lf["rank"], lf["model_rank"]) == (1, 3) and (hs["rank"], hs["model_rank"]) == (2, 1)
    two = pd.concat([pts.assign(build="a" * 64), pts.assign(build="b" * 64, point_id=pts["point_id"] + 100)])
    t2 = ranking.ranking_table(two)
    assert t2["workload"].nunique() == 2 and any("build bbbbbbbb" in w for w in t2["workload"])
    fig = ranking.ranking_figure(table)
    bars = fig["data"][0]
    assert bars["y"][0].startswith("1. lf · epoll-lt") and bars["x"][0] == 100.0
    assert bars["marker"]["line"]["color"][0] == style.PATTERN_COLOUR["lf"]


def history_frame() -> pd.DataFrame:
    """Two spec versions × builds of one experiment: lf/select at 8 threads loses 20 % in the second,
    hsha/epoll-lt at 4 threads gains 15 %, the rest stays within 1 % noise."""
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    old = points(experiment_id=1, spec_sha256="1" * 64, build="a" * 64, first_started=t0)
    new = points(
        experiment_id=2,
        spec_sha256="2" * 64,
        build="b" * 64,
        first_started=t0 + dt.timedelta(days=1),
    )
    new = scaled(
        new,
        [
            (p, n, t) == ("lf", "select", 8)
            for p, n, t in zip(new["pattern"], new["notifier"], new["threads"], strict=False)
        ],
        0.8,
    )
    new = scaled(
        new,
        [
            (p, n, t) == ("hsha", "epoll-lt", 4)
            for p, n, t in zip(new["pattern"], new["notifier"], new["threads"], strict=False)
        ],
        1.15,
    )
    new = new.assign(point_id=new["point_id"] + 100)
    return pd.concat([new, old], ignore_index=True)  # order in the frame does not matter


def test_history_flags_changes_beyond_noise_with_both_builds_named() -> None:
    frame = history_frame()
    revs = history.revisions(frame, "demo")
    assert [r.build[:1] for r in revs] == ["a", "b"]  # oldest first
    ch = history.changes(frame, "demo")
    assert len(ch) == 2
    reg = ch[ch["verdict"] == "regression"].iloc[0]
    imp = ch[ch["verdict"] == "improvement"].iloc[0]
    assert reg["point"].startswith("lf/select/t8/") and reg["change_pct"] == pytest.approx(-20.0)
    assert imp["point"].startswith("hsha/epoll-lt/t4/") and imp["change_pct"] == pytest.approx(15.0)
    assert "build aaaaaaaa" in reg["before"] and "build bbbbbbbb" in reg["after"]
    assert "/run?run=" in reg["runs"] and "→" in reg["runs"]
    assert "a_build=" + "a" * address.BUILD_CHARS in reg["compare"] and "b=demo%40" in reg["compare"]
    table = history.revisions_table(history.analyse(frame, "demo"))
    assert list(table["points"]) == [12, 12] and list(table["runs_ok"]) == [36, 36]


def test_history_figure_runs_oldest_to_newest_and_rings_changes() -> None:
    fig = history.history_figure(history.analyse(history_frame(), "demo"))
    assert fig["layout"]["xaxis"]["ticktext"][0].startswith("1. spec 11111111 · build aaaaaaaa")
    assert fig["layout"]["xaxis"]["tickvals"] == [0, 1]
    lf8 = next(t for t in fig["data"] if t["name"] == "lf · select · 8 thr")
    assert lf8["marker"]["line"]["color"][1] == style.REGRESSION and lf8["marker"]["size"] == [7, 13]
    assert lf8["line"]["color"] == style.PATTERN_COLOUR["lf"]
    assert fig["layout"]["yaxis"]["range"][0] == 0


def test_history_marks_hide_no_series() -> None:
    """Issue 45: on History lf at 2, 4 and 8 threads shared colour, dash and marker, and the twelve series
    sat on two columns, one mark over another. Now no two series share colour, dash and marker; marks that
    meet at a revision are set side by side (each series its own x, within the revision's slot), and the
    legend says what each mark tells."""
    fig = history.history_figure(history.analyse(history_frame(), "demo"))
    looks = [(t["line"]["color"], t["line"]["dash"], t["marker"]["symbol"][0]) for t in fig["data"]]
    assert len(set(looks)) == len(looks), looks
    for rev in (0, 1):
        xs = [t["x"][rev] for t in fig["data"]]
        assert len(set(xs)) == len(xs) and all(abs(x - rev) < 0.5 for x in xs), xs
    assert "marker: server threads" in fig["layout"]["legend"]["title"]["text"]
    lf8 = next(t for t in fig["data"] if t["name"] == "lf · select · 8 thr")
    change = next(a for a in fig["layout"]["annotations"] if a["text"] == "-20 %")
    assert change["x"] == lf8["x"][1]  # the change's label at its point, where the dodge drew it


def test_fields_come_from_the_point() -> None:
    assert tuple(f for f in POINT_FIELDS if f != "instrument") == fields.PARAMS
    assert set(fields.AXES) == {"threads", "work_us", "connections", "msg_size", "client_threads", "rate"}
    assert "threads" in fields.INTEGER and "work_us" not in fields.INTEGER
    assert ranking.WORKLOAD == ("work_us", "connections", "msg_size", "client_threads", "rate")


def test_addresses_are_checked_before_use() -> None:
    checked = address.check(
        {
            "experiment": "smoke\x00",
            "x": "t" * 20_000,
            "facet": ["a", "b"],
            "colour": "pattern",
            "other": "\x00",
        },
        ["experiment", "x", "facet", "colour"],
    )
    assert checked.values == {"colour": "pattern"}
    nul, long, twice = checked.problems
    assert "NUL" in nul and "\\x00" in nul
    assert "20,000 characters" in long and len(long) < 200
    assert "given 2 times" in twice
    assert address.excerpt("a\x07b") == "'a\\x07b'"


def test_ranking_and_recommendation_decide_tied_alike_and_keep_oversubscribed_points_apart() -> None:
    """The smoke once had two meanings of "tied": the Ranking (Welch) said tpc t2 and hsha/epoll-et t2
    differ from the best, the recommendation (intervals overlap) called the best tied with all eleven
    others; and the #1 design was a 2-thread point on a 1-CPU server. One decision, one candidate set."""
    from demuxlab.claims import recommend
    from demuxlab.stats import point_summary

    runs = {
        ("reactor", "poll", 1): [67_829.3, 67_970.7],  # sd 100
        ("tpc", "none", 1): [66_829.3, 66_970.7],  # 10 sd lower: differs (Welch p ≈ 0.01), intervals overlap
        ("lf", "select", 1): [64_000.0, 69_000.0],  # tied with it
        ("hsha", "epoll-et", 2): [90_000.0, 91_000.0],  # the highest, but 2 threads on 1 CPU
    }
    rows = []
    for i, ((pattern, notifier, threads), vals) in enumerate(runs.items(), start=1):
        rows.append(
            {
                **points(patterns=(pattern,), notifiers=(notifier,), threads=(threads,), start_id=i).iloc[0],
                "values": vals,
                "server_cpus": 1,
            }
        )
    frame = pd.DataFrame(rows)
    table = ranking.ranking_table(frame)
    verdict = {(r["pattern"], r["threads"]): r["differs_from_best"] for _, r in table.iterrows()}
    assert table.iloc[0]["pattern"] == "reactor" and table.iloc[-1]["rank"] == ranking.APART
    assert verdict[("tpc", 1)] == "yes" and verdict[("lf", 1)] == "no"
    claims_rows = []
    for (pattern, notifier, threads), vals in runs.items():
        s = point_summary(vals)
        claims_rows.append(
            {
                "pattern": pattern,
                "notifier": notifier,
                "threads": threads,
                "work_us": 10.0,
                "connections": 64,
                "msg_size": 1,
                "mean": s.mean,
                "ci_low": s.ci_low,
                "ci_high": s.ci_high,
                "n": s.n,
                "server_cpus": 1,
            }
        )
    (rec,) = recommend(claims_rows)
    assert rec.best.label == "reactor/poll t1"
    assert [p.label for p in rec.tied] == ["lf/select t1"]  # tpc t1 differs, as the Ranking says
    assert [p.label for p in rec.apart] == ["hsha/epoll-et t2"] and "not ranked" in rec.note
    fig = ranking.ranking_figure(table)
    text = fig["data"][0]["text"]
    assert text[0].startswith("best") and text[-1] == "not ranked: oversubscribed"
    assert any(t.startswith("differs from the best (p = ") for t in text)
    assert any(t.startswith("tied with the best (p = ") for t in text)
    colours = fig["data"][0]["marker"]["color"]
    tied_at = next(i for i, t in enumerate(text) if t.startswith("tied"))
    assert colours[tied_at] == "#ffffff" and colours[0] != "#ffffff"  # open: tied; filled: the best


def test_ranking_opens_on_the_calibrated_rates_where_there_are_any() -> None:
    pts = points()
    assert ranking.default_source(preds(pts)) == "calibration"
    assert ranking.default_source(preds(pts).query("source == 'paper'")) == "paper"
    assert ranking.default_source(None) == "paper"
