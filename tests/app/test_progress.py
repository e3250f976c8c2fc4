"""The job's progress line (issue 31, point 7): stage k of n, tasks, documents, rate, time left;
redrawn on a terminal, logged every ~30 s otherwise, in every cluster mode."""

from __future__ import annotations

import io

from curate.app import progress


def state(**p):
    return {"stages": [{"name": "clean"}, {"name": "filter"}, {"name": "tokenize"}], "current": 1,
            "progress": {"started": 100.0, "partitions_done": 3, "partitions_total": 12, "documents": 30_000, **p}}


def test_the_line_by_hand():
    assert progress.line(state(), now=110.0) == (
        "stage 2 of 3 (filter), 3/12 tasks, 30,000 docs, 3,000 docs/s, ~30s left in this stage, 10s in this stage")
    assert progress.line({"stages": [], "current": None}) is None
    assert progress.line(state(partitions_done=12), now=4000.0).endswith("1h05m in this stage")


def test_documents_of_the_stage_before_give_the_time_left_for_the_stage_and_the_job():  # issue 43, point 6
    st = state(documents=30_000, docs_at=105.0, partitions_done=13)
    st["stages"][0].update(status="done", seconds=50.0, counts={"in": 100_000, "out": 90_000})
    # 30,000 of 90,000 documents in the 5 s they came in: 6,000 docs/s, 10 s left; then tokenize at
    # clean's pace (0.5 ms a document) for 90,000 documents: 45 s; 13/12 tasks shows as 12/12
    assert progress.line(st, now=110.0) == (
        "stage 2 of 3 (filter), 12/12 tasks, 30,000 of 90,000 docs, 6,000 docs/s, ~10s left in this stage, "
        "~55s left in the job, 10s in this stage")
    # a stage that counts documents only as it writes (dedup): the rate does not decay in between
    assert "6,000 docs/s" in progress.line(st, now=400.0)


def test_a_terminal_gets_one_line_redrawn(monkeypatch):
    class Tracker:
        import threading
        lock = threading.Lock()
        state = state()

    monkeypatch.setattr(progress, "DRAW_EVERY", 0.05)
    out = io.StringIO()
    line = progress.ProgressLine(Tracker(), stream=out, tty=True).start()
    import time

    time.sleep(0.3)
    line.close()
    text = out.getvalue()
    assert text.count("\r\x1b[2K") >= 2 and "stage 2 of 3 (filter)" in text and "\n" not in text


def test_a_job_in_a_pipe_logs_its_progress(tmp_path, monkeypatch):
    from curate.app.cli import main
    from tests.conftest import write_jsonl

    monkeypatch.setattr(progress, "LOG_EVERY", 0.05)
    for k in range(2):
        write_jsonl(tmp_path / "in" / f"{k}.jsonl", [{"id": f"{k}-{i}", "text": f"words {i} " * 30} for i in range(50)])
    (tmp_path / "job.yaml").write_text(f"name: p\ninput: '{tmp_path / 'in' / '*.jsonl'}'\nstages:\n  - clean: {{}}\n"
                                       "  - exact_dedup: {}\n")
    lines = []

    class Log:
        def info(self, fmt, *args):
            lines.append(fmt % args)

    monkeypatch.setattr(progress, "log", Log())
    assert main(["run", str(tmp_path / "job.yaml"), "--output", str(tmp_path / "out"), "--cluster", "threads"]) == 0
    assert any(m.startswith("progress: stage 1 of 2 (clean)") for m in lines) or \
        any(m.startswith("progress: stage 2 of 2 (exact_dedup)") for m in lines), lines


def test_a_log_record_is_not_glued_onto_the_line(monkeypatch):  # issue 43, point 6
    import logging
    import threading
    import time

    class Tracker:
        lock = threading.Lock()
        state = state()

    monkeypatch.setattr(progress, "DRAW_EVERY", 0.05)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        line = progress.ProgressLine(Tracker(), stream=out, tty=True).start()
        time.sleep(0.2)
        logging.getLogger("curate.test").warning("a record")
        time.sleep(0.2)
        line.close()
    finally:
        root.removeHandler(handler)
    text = out.getvalue()
    before = text[:text.index("a record")]
    assert before.endswith("\r\x1b[2K"), repr(text[-300:])  # the line was cleared first
    assert "stage 2 of 3" in text[text.index("a record"):]  # and drawn again after it
    assert not handler.filters
