"""The apply report for people: a column for each outcome some phase has (deleted and failed always),
known outcomes by a short label, others by their own name; the summary line counts every outcome."""

from lakesweep.applier.apply import ApplyReport
from lakesweep.cli import render


def _header(text: str) -> list[str]:
    line = next(line for line in text.splitlines() if "phase" in line)
    return [cell.strip() for cell in line.strip("┃ ").split("┃")]


def test_todays_outcomes_keep_their_columns_and_summary(printed):
    counts = {"DELETED": 14, "ALREADY_ABSENT": 0, "WRITTEN": 1, "KEPT_NOT_EMPTY": 0, "FAILED": 0}
    phase = {"phase": "hint", "actions": 1, **dict.fromkeys(counts, 0), "WRITTEN": 1, "bytes": 0}
    render.render_report(ApplyReport(plan_id="p1", apply_id="a1", state="COMPLETED", counts=counts,
                                     bytes_reclaimed=2048, duration_ms=1500, phases=[phase]))
    out, err = printed()
    assert out.splitlines()[0] == "Apply completed: plan p1, apply a1"
    assert _header(out) == ["phase", "actions", "deleted", "written", "failed", "bytes"]
    assert out.splitlines()[-1] == "  deleted 14, already absent 0, failed 0; reclaimed 2.0 KiB in 1.5 s"
    assert err == ""


def test_a_dry_run_says_would_delete(printed):
    counts = {"DELETED": 3, "ALREADY_ABSENT": 0, "FAILED": 0}
    render.render_report(ApplyReport(plan_id="p1", apply_id=None, state="DRY_RUN", dry_run=True, counts=counts,
                                     phases=[{"phase": "data", "actions": 3, "DELETED": 3, "bytes": 30}]))
    out, _ = printed()
    assert _header(out) == ["phase", "actions", "to delete", "failed", "to reclaim"]
    assert out.splitlines()[-1] == "  would delete 3, already absent 0, failed 0; would reclaim 0 B in 0.0 s"


def test_an_outcome_without_a_label_is_shown_under_its_name(printed):
    counts = {"DELETED": 2, "COMMITTED": 1, "SKIPPED_REFERENCED": 4, "NEW_OUTCOME": 1, "FAILED": 0}
    phases = [{"phase": "data", "actions": 7, "DELETED": 2, "SKIPPED_REFERENCED": 4, "NEW_OUTCOME": 1, "FAILED": 0,
               "bytes": 20},
              {"phase": "commit", "actions": 1, "COMMITTED": 1, "bytes": 0}]
    render.render_report(ApplyReport(plan_id="p1", apply_id="a1", state="COMPLETED", counts=counts, phases=phases))
    out, _ = printed()
    assert _header(out) == ["phase", "actions", "deleted", "committed", "skipped", "NEW_OUTCOME", "failed", "bytes"]
    rows = [[c.strip() for c in line.strip("│ ").split("│")] for line in out.splitlines() if line.startswith("│")]
    assert rows == [["data", "7", "2", "0", "4", "1", "0", "20 B"], ["commit", "1", "0", "1", "0", "0", "0", "0 B"]]
    assert out.splitlines()[-1].startswith("  deleted 2, committed 1, skipped (still needed) 4, NEW_OUTCOME 1, "
                                           "failed 0; reclaimed")


def test_a_failed_apply_names_the_next_step_on_stderr(printed):
    render.render_report(ApplyReport(plan_id="p1", apply_id="a1", state="FAILED", counts={"DELETED": 0, "FAILED": 1},
                                     reason="phase data: 1 file could not be deleted"))
    _, err = printed()
    assert err.splitlines() == ["error: phase data: 1 file could not be deleted",
                                "Fix the cause, then run: lakesweep resume p1"]


def test_a_refused_apply_is_one_line_on_stderr(printed):
    render.render_report(ApplyReport(plan_id="p1", apply_id=None, state="REFUSED", reason="stale"))
    out, err = printed()
    assert (out, err) == ("", "Refused: plan p1: stale\n")


def test_the_check_after_the_last_phase_is_told_whole_or_not(printed):
    counts = {"DELETED": 2, "ALREADY_ABSENT": 0, "FAILED": 0}
    ok = {"whole": True, "only": 2, "problems": []}
    render.render_report(ApplyReport(plan_id="p1", apply_id="a1", state="COMPLETED", counts=counts, verify=ok))
    out, err = printed()
    assert out.splitlines()[-1] == "  verified: none of the 2 location(s) it deleted is needed by the table"
    assert err == ""
    bad = {"whole": False, "only": 2, "problems": [
        {"kind": "missing", "path": "/t/dt=a/bucket-0/f.parquet", "detail": "file does not exist",
         "needed_by": "tag 'late'", "holders": 1}]}
    render.render_report(ApplyReport(plan_id="p1", apply_id="a1", state="COMPLETED", counts=counts, verify=bad))
    out, err = printed()
    assert out.count("verified:") == 1  # the first report's line only
    assert err.splitlines()[:2] == [
        "error: the table is not whole after the apply: 1 problem(s)",
        "  missing: /t/dt=a/bucket-0/f.parquet (needed by tag 'late'): file does not exist"]
