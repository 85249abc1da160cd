"""Write the bundled sample question sets (``<set>.csv``) from hand-written questions and excerpts.

Each excerpt is copied by hand from a sample text (``assets/samples/``) and must occur in it
exactly once; its offsets are computed here on the text as the benchmark reads a corpus
(UTF-8, universal newlines), so ``text[start_index:end_index] == content``. Rerun after
editing a sample text or a question: ``python assets/samples/questions/make_questions.py``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent

SETS: dict[str, tuple[str, list[tuple[str, list[str]]]]] = {
    "narrative": (
        "narrative_clockmaker.txt",
        [
            ("What time had the clock above the shop shown for years?",
             ["It had said twenty past four for as long as anyone had been looking"]),
            ("Who first noticed that the clock had started ticking?",
             ["Mrs. Okafor, who ran the bakery across the road, noticed first, "
              "because she was always first at everything."]),
            ("How old was Tobias Abernathy when he died?",
             ["had died in his sleep at the age of 91"]),
            ("How long did Nell study mechanical engineering?",
             ["studied mechanical engineering for 3.5 years before running out of money"]),
            ("How many watches in the shop were never collected?",
             ["There are forty-one watches in these drawers that were never collected."]),
            ("What does the last entry of the ledger say?",
             ["No. 14,207. The big clock. Fault: stopped at 4.20, 1979. Owner: the lane. Price: nil. "
              "To be collected when finished."]),
            ("What had somebody used to replace a pivot in the big clock?",
             ["The escapement was worn and somebody had replaced a pivot with a sewing needle."]),
            ("Who suggested looking for the owners of the uncollected watches?",
             ["It was Dr. Priya Raman, the retired GP who lived above the chemist's, who suggested that the forty-one "
              "uncollected watches might still have owners"]),
            ("What did the repair of Mr. Fairweather's watch cost?",
             ["The price was £2.50."]),
            ("How many watches had been returned by midsummer?",
             ["By midsummer they had returned twenty-three of the forty-one watches."]),
            ("What did the old clockmaker write inside the back cover of the ledger?",
             ["Everything in this shop is about people running out of time. Fix it anyway."]),
            ("What did the seven watches without an owner's name have in common?",
             ["in the column for the owner's name there was only a small drawing",
              "Every one of the seven watches had been brought in during a week when something had "
              "happened in Harrow Lane"]),
        ],
    ),
    "technical": (
        "technical_kestrel.md",
        [
            ("How many replicas does Kestrel keep of each object by default?",
             ["Every object is stored as a number of **replicas**, three by default."]),
            ("How large is a segment by default?",
             ["each node appends incoming data to **segments**: large files of 256 MiB by default"]),
            ("When is a write acknowledged to the client?",
             ["When a majority of replicas (two out of three by default) have written the data and flushed it to disk, "
              "the coordinator records the object in the metadata log and acknowledges the write to the client."]),
            ("How often is the metadata log compacted into snapshots?",
             ["The log is compacted into snapshots every 100,000 entries or every 30 minutes, whichever comes first."]),
            ("How much clock skew between nodes does Kestrel tolerate?",
             ["Kestrel tolerates clock skew of up to 0.5 seconds between nodes"]),
            ("Which TCP ports must be open between nodes?",
             ["TCP ports 7400 (client API), 7401 (replication) and 7402 (metadata log) open between nodes"]),
            ("Why should the write quorum not equal the replication factor?",
             ["it means a single slow disk stalls every write in the cluster"]),
            ("At which garbage ratio does the compactor rewrite a segment by default?",
             ["rewrites segments whose garbage ratio exceeds `compaction_threshold` (0.35, i.e. 35%, by default)"]),
            ("At which free-disk ratio should an operator alert and act?",
             ["`kestrel_disk_free_ratio`: alert at 0.15 and act at 0.10."]),
            ("How do I remove a node from a cluster permanently?",
             ["To remove a node permanently, drain it first:",
              "Never simply switch off a node you intend to remove"]),
            ("What is the default replication timeout?",
             ["the `replication_timeout` (default 5.0 seconds)"]),
            ("How large are the largest production Kestrel clusters?",
             ["The largest production clusters we know of run about 120 nodes and 4.5 PB of data."]),
        ],
    ),
}


def _read(path: Path) -> str:
    """A corpus as the benchmark reads it (``backend.retrieval.questions.read_corpus_text``)."""
    return path.read_bytes().decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def write_sets(sets: dict[str, tuple[str, list[tuple[str, list[str]]]]], out: Path) -> None:
    """Write ``out/<set>.csv`` for each set: its questions, each excerpt located exactly once in the sample.

    Beside each, ``<set>.method`` says the questions are hand-written (what a loaded set states).
    """
    out.mkdir(exist_ok=True)
    for name, (file_name, questions) in sets.items():
        text = _read(SAMPLES / file_name)
        corpus_id = Path(file_name).stem
        rows = []
        for question, excerpts in questions:
            refs = []
            for excerpt in excerpts:
                start = text.find(excerpt)
                if start < 0 or text.find(excerpt, start + 1) >= 0:
                    raise SystemExit(f"{name}: excerpt not found exactly once: {excerpt[:60]!r}")
                refs.append({"content": excerpt, "start_index": start, "end_index": start + len(excerpt)})
            rows.append([question, json.dumps(refs, ensure_ascii=False), corpus_id])
        with open(out / f"{name}.csv", "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["question", "references", "corpus_id"])
            writer.writerows(rows)
        (out / f"{name}.method").write_text("hand-written\n", encoding="utf-8")
        print(f"{(out / f'{name}.csv').relative_to(HERE)}: {len(rows)} questions over {file_name}")


def main() -> None:
    write_sets(SETS, HERE)


if __name__ == "__main__":
    main()
