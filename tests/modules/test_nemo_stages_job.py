"""The new stages chained in one job YAML: settings from YAML, each stage reading the one before."""

import json

from tests.conftest import read_output, write_jsonl
from tests.modules.test_decontaminate import FILLER, QUESTION


def test_job_with_the_new_stages(tmp_path):
    from curate.app.runner import load_job, run_job

    write_jsonl(tmp_path / "task.jsonl", [{"question": QUESTION}])
    write_jsonl(tmp_path / "in.jsonl", [
        {"id": "a", "text": f"{FILLER}.\n\nIntro sentence here. {QUESTION} twelve. More text. {FILLER} end."},
        {"id": "b", "text": f"{FILLER}.\n\nSecond paragraph of b."},
    ])
    job = tmp_path / "job.yaml"
    job.write_text(f"""
input: {tmp_path / 'in.jsonl'}
stages:
  - decontaminate: {{tasks: [quiz={tmp_path / 'task.jsonl'}], task_fields: [question], min_document_length: 20,
                     remove_char_each_side: 10}}
  - split_documents: {{separator: "\\\\n\\\\n"}}
  - join_documents: {{separator: "\\\\n\\\\n"}}
  - add_id: {{prefix: web, width: 3}}
  - blend: {{weights: [1], target_size: 5, seed: 1}}
""")
    outcomes = run_job(load_job(str(job)), str(tmp_path / "out"))
    assert [o.name for o in outcomes] == ["decontaminate", "split_documents", "join_documents", "add_id", "blend"]
    ids = read_output(tmp_path / "out" / "04-add_id")
    assert ids["id"].tolist() == ["web-000", "web-001", "web-002"]  # a#0, a#1, b
    assert ids["text"].tolist()[2] == f"{FILLER}.\n\nSecond paragraph of b."  # split + join: unchanged
    blend = read_output(tmp_path / "out" / "05-blend")
    assert len(blend) == 5 and blend["id"].is_unique
    m = json.load(open(tmp_path / "out" / "01-decontaminate" / "_manifest.json"))
    assert m["decontaminate"]["tasks"]["quiz"]["documents_cut"] == 1
