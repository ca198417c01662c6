"""`shambench.reporting.compare`: paired bootstrap of two runs over their shared examples, checked on hand-scored cases."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shambench.cli import main
from shambench.errors import DataError
from shambench.reporting.compare import compare_predictions, compare_runs, p_value, shared_examples
from shambench.schema import Example, Prediction
from tests.leaderboard.toy import EXAMPLES, make_run, predictions, write_examples

TOY = [Example.model_validate(r) for r in EXAMPLES]
B = 400


def _by(comparison, level: str, group: str):
    return next(d for d in comparison.differences if d.level == level and d.group == group)


def test_identical_runs_differ_by_nothing():
    c = compare_predictions(TOY, predictions("all"), predictions("all"), n_resamples=B)
    for d in c.differences:
        assert d.diff == 0 and d.ci == (0.0, 0.0)
        # Every replicate difference is 0, and |0 - 0| >= 0: p = (1 + B) / (1 + B) = 1.
        assert d.p_value == 1.0


def test_exact_against_none_by_hand():
    c = compare_predictions(TOY, predictions("exact"), predictions("none"), names=("exact", "none"), n_resamples=B)
    # Per-example span F1: exact (1, 1, 1), none (0, 1, 0) for (q1, q2, s1).
    summ = _by(c, "span", "summ")
    # One example, difference 1 in every resample: interval (1, 1); no replicate is as far from 1 as 0 is,
    # so p = 1 / (1 + B).
    assert (summ.f1_a, summ.f1_b, summ.diff, summ.n) == (1.0, 0.0, 1.0, 1)
    assert summ.ci == pytest.approx((1.0, 1.0))
    assert summ.p_value == pytest.approx(1 / (B + 1))
    qa = _by(c, "span", "context_qa")
    # Differences (1, 0): mean 0.5; a resample of 2 draws gives 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4.
    assert qa.diff == pytest.approx(0.5) and qa.ci == pytest.approx((0.0, 1.0))
    # |d* - 0.5| >= 0.5 exactly when d* is 0 or 1: about half the replicates.
    assert 0.4 < qa.p_value < 0.6
    overall = _by(c, "span", "overall")
    # Mean over the two tasks: (0.5 + 1) / 2 = 0.75; its replicates are (context_qa replicate + 1) / 2.
    assert (overall.f1_a, overall.f1_b, overall.diff, overall.n) == (1.0, 0.25, 0.75, 3)
    assert overall.ci == pytest.approx((0.5, 1.0))
    assert [d.group for d in c.differences] == ["overall", "context_qa", "summ"] * 2
    assert [d.level for d in c.differences] == ["span"] * 3 + ["sentence"] * 3


def test_p_value_of_replicates():
    # Observed 0.2; replicates shifted by -0.2 are (-0.2, 0, 0.2, 0.4) in absolute value 0.2, 0, 0.2, 0.4:
    # three are >= 0.2, so p = (1 + 3) / (1 + 4) = 0.8.
    assert p_value(0.2, np.array([0.0, 0.2, 0.4, 0.6])) == pytest.approx(0.8)


spans = st.lists(st.tuples(st.integers(0, 28), st.integers(1, 10)), max_size=3)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(spans, min_size=3, max_size=3), st.lists(spans, min_size=3, max_size=3))
def test_swapping_the_runs_negates_the_difference(raw_a, raw_b):
    def preds(raw):
        out = []
        for ex, ranges in zip(TOY, raw):
            n = len(ex.response)
            out.append(Prediction(id=ex.id, spans=[[min(s, n - 1), min(s + w, n)] for s, w in ranges]))
        return out

    ab = compare_predictions(TOY, preds(raw_a), preds(raw_b), n_resamples=50)
    ba = compare_predictions(TOY, preds(raw_b), preds(raw_a), n_resamples=50)
    for x, y in zip(ab.differences, ba.differences):
        assert x.diff == pytest.approx(-y.diff)
        assert x.ci == pytest.approx((-y.ci[1], -y.ci[0]), abs=1e-6)
        assert x.p_value == pytest.approx(y.p_value)


def test_only_shared_ids_are_compared_and_must_agree():
    shared, only_a, only_b = shared_examples(TOY, TOY[1:])
    assert [e.id for e in shared] == ["q2", "s1"] and (only_a, only_b) == (1, 0)
    changed = TOY[2].model_copy(update={"response": "Bob bought pears. He ate it."})
    with pytest.raises(DataError, match="example 's1' differs between the two runs"):
        shared_examples(TOY, [changed])
    with pytest.raises(
        DataError,
        match=r"^the two runs share no example id \(A holds context_qa/toyqa; B holds context_qa/toyqa, summ/toysum\)$",
    ):
        shared_examples(TOY[:1], TOY[1:])


def test_compare_run_directories_and_cli(tmp_path):
    examples = write_examples(tmp_path / "examples.jsonl")
    run_a = make_run(tmp_path / "a", examples, "exact")
    run_b = make_run(tmp_path / "b", examples, "all")
    c = compare_runs(run_a, run_b, n_resamples=B)
    # overall span: 1 - (0.125 + 2/9) / 2 = 0.826389.
    assert (c.run_a, c.run_b, c.n_shared) == ("exact", "all", 3)
    assert _by(c, "span", "overall").diff == pytest.approx(1 - (0.125 + 2 / 9) / 2)
    out = tmp_path / "cmp.json"
    result = CliRunner().invoke(main, ["compare", str(run_a), str(run_b), "--bootstrap", "50", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "A = exact   B = all" in result.output and "+0.826" in result.output
    assert '"group": "overall"' in out.read_text()
    # exact is above all under every convention (figures 1.0) and in every resample (all never reaches 1).
    assert "Ranks under every convention" in result.output and "holds (100.0% of resamples)" in result.output
    ranks = json.loads(out.read_text())["ranks"]
    assert [r["name"] for r in ranks["rows"]] == ["exact", "all"] and ranks["pairs"][0]["verdict"] == "holds"


def _drop_and_fail(run_dir, drop: str | None = None, fail: str | None = None) -> None:
    """Rewrite a run's journal without `drop`'s line and with `fail`'s prediction failed."""
    journal = run_dir / "predictions.jsonl"
    lines = [Prediction.model_validate_json(line) for line in journal.read_text().splitlines()]
    kept = [p if p.id != fail else Prediction(id=p.id, error="boom") for p in lines if p.id != drop]
    journal.write_text("".join(p.model_dump_json() + "\n" for p in kept))


def test_compare_leaves_out_unpredicted_ids_and_counts_them(tmp_path):
    examples = write_examples(tmp_path / "examples.jsonl")
    run_a = make_run(tmp_path / "a", examples, "exact")
    run_b = make_run(tmp_path / "b", examples, "all")
    _drop_and_fail(run_a, drop="s1")
    _drop_and_fail(run_b, fail="q2")
    c = compare_runs(run_a, run_b, n_resamples=B)
    # Only q1 is predicted by both: context_qa alone, exact 1 against all's 2/8 = 0.25.
    assert (c.n_shared, c.unpredicted) == (1, 2)
    assert _by(c, "span", "overall").diff == pytest.approx(0.75)
    assert c.counts_a.model_dump() == {"predicted": 2, "failed": 0, "missing": 1}
    assert c.counts_b.model_dump() == {"predicted": 2, "failed": 1, "missing": 0}
    # --missing-as-empty: A = (mean(1, 1) + 0) / 2 = 0.5; B = (mean(0.25, 1) + 2/9) / 2 (failed q2: nothing vs nothing).
    c = compare_runs(run_a, run_b, n_resamples=B, missing_as_empty=True)
    assert (c.n_shared, c.unpredicted, c.missing_as_empty) == (3, 0, True)
    assert _by(c, "span", "overall").diff == pytest.approx(0.5 - (0.625 + 2 / 9) / 2)
    res = CliRunner().invoke(main, ["compare", str(run_a), str(run_b), "--bootstrap", "50", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["unpredicted"] == 2 and data["counts_a"]["missing"] == 1
    assert "run A (exact): 2 predicted, 0 failed, 1 missing" in res.stderr
    assert "run B (all): 2 predicted, 1 failed, 0 missing" in res.stderr
    assert "warning: 2 shared example(s) left out" in res.stderr
