# %% [markdown]
# # curate from Python
#
# A notebook-style script (each `# %%` is a cell): curate's stages on a pandas DataFrame, a stage and a
# filter of your own, then a whole pipeline on files with the same resume, manifests and report as
# `curate run`. Run it with `python docs/examples/notebook.py [WORKDIR]`; `tests/test_docs.py` does.

# %%
import json
import os
import sys
import tempfile

import pandas as pd

import curate

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # my_plugins.py, the filter and stage of our own, sits beside this script
os.environ["PYTHONPATH"] = os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")])  # ... and the workers'
from my_plugins import StripSignature  # noqa: E402

work = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="curate-notebook-")
os.makedirs(work, exist_ok=True)
print(sorted(curate.list_stages())[:5], "...")

# %% [markdown]
# ## A stage on a DataFrame, in memory
# `Step(name, **settings)` checks the settings at once; `.apply(df)` runs the stage's pure pandas
# transform. `rejects=True` also returns the dropped rows with their reason.

# %%
docs = pd.DataFrame({
    "id": ["a", "b", "c", "d"],
    "text": ["Caf\u00c3\u00a9 au lait,   twice.", "   ", "THIS IS ALL SHOUTING, SORRY",
             "A letter.\n-- \nJane, sent from my phone"],
})
kept, dropped = curate.Step("clean").apply(docs, rejects=True)
print(kept)
print(dropped[["id", "_reason"]])
assert list(kept["id"]) == ["a", "c", "d"] and kept["text"].iloc[0].startswith("Café")

# %% [markdown]
# ## Your own stage and filter
# A `MapStage` subclass is a stage like any other; a `DocumentFilter` subclass goes into a chain, in
# Python or YAML, as `module:Class`.

# %%
signed = curate.Step(StripSignature).apply(kept)
assert signed.set_index("id").loc["d", "text"] == "A letter."
chain = os.path.join(work, "chain.yaml")
with open(chain, "w") as f:
    f.write("filters:\n  - {filter: word_count, min: 2}\n  - {filter: 'my_plugins:ShoutingFilter', max: 0.5}\n")
filtered = curate.Step("filter", config=chain, keep_scores=True).apply(signed)
print(filtered)
assert list(filtered["id"]) == ["a", "d"]

# %% [markdown]
# ## A pipeline on files
# The same steps on JSONL files. Output folders, manifests, resume, ownership and the HTML report are
# those of `curate run`. `cluster="threads"` runs in this process with Dask's threaded scheduler
# (nothing listens, nothing is spawned); `workers=2` starts a local cluster instead (in a script, call
# it under `if __name__ == "__main__":`, as worker processes import the main module), and `client=`
# runs on a `dask.distributed.Client` of yours.

# %%
os.makedirs(os.path.join(work, "data"), exist_ok=True)
for part in range(2):
    with open(os.path.join(work, "data", f"part{part}.jsonl"), "w") as f:
        for _, row in docs.iterrows():
            f.write(json.dumps({"id": f"{part}-{row['id']}", "text": row["text"]}) + "\n")

pipeline = curate.Pipeline([
    curate.Step("clean"),
    curate.Step(StripSignature),
    curate.Step("filter", config=chain),
    curate.Step("exact_dedup"),
    curate.Step("tokenize", tokenizer="tiktoken:cl100k_base"),
], name="notebook")
out = os.path.join(work, "out")
print(pipeline.plan(os.path.join(work, "data", "*.jsonl"), out))
result = pipeline.run(os.path.join(work, "data", "*.jsonl"), out, cluster="threads")
print(result.summary())
assert [os.path.basename(o.output) for o in result.stages] == [
    "01-clean", "02-strip_signature", "03-filter", "04-exact_dedup", "05-tokenize"]
assert result.stages[3].manifest["counts"]["dropped"] == {"exact_duplicate": 2}
assert os.path.exists(os.path.join(out, "_reports", "report.html"))

# %%
again = pipeline.run(os.path.join(work, "data", "*.jsonl"), out, cluster="threads")  # resumed: all up to date
assert all(o.skipped for o in again.stages)
print("done:", result.final)
