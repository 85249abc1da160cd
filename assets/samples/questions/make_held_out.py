"""Write the held-out sample question sets (``held_out/<set>.csv``) from hand-written questions and excerpts.

These are 36 questions per bundled sample text (``narrative_clockmaker``, ``technical_kestrel``),
written by hand by a different author than the bundled 12 (``make_questions.py``), following the
Chroma report's question-generation prompt: one specific, concise question per set of facts,
answerable only from its references; references copied exactly from the text (whole sentences
where possible, at most 5 per question); questions spread over the whole text. None of them
reuses or paraphrases a bundled question. They are held out for checking how cheap
question-generation methods rank chunkings, and are never used to design those methods.

Each excerpt is copied by hand from a sample text (``assets/samples/``) and must occur in it
exactly once; its offsets are computed here on the text as the benchmark reads a corpus
(UTF-8, universal newlines), so ``text[start_index:end_index] == content``. Rerun after
editing a sample text or a question: ``python assets/samples/questions/make_held_out.py``.
"""

from __future__ import annotations

from pathlib import Path

from make_questions import write_sets  # the bundled sets' writer, beside this script

OUT = Path(__file__).resolve().parent / "held_out"

SETS: dict[str, tuple[str, list[tuple[str, list[str]]]]] = {
    "narrative": (
        "narrative_clockmaker.txt",
        [
            ("What was the street almost renamed after?",
             ["one very short-lived attempt to rename the street after a racehorse"]),
            ("On what day did the clock start ticking again?",
             ["So when the clock began to tick on a wet Tuesday in March, the whole lane noticed."]),
            ("What did Mrs. Okafor do for the first time in her years at the bakery?",
             ["Then she put the tray down on the step, which she had never done in eleven years of business, "
              "and went to fetch her husband."]),
            ("According to the notice in the shop window, what had happened to the premises?",
             ["The notice said that the premises and their contents had passed to a relative, "
              "and that enquiries should be made in writing."]),
            ("What explanations did the crowd give for the clock starting?",
             ['"Damp," said the man from the hardware shop.',
              '"Pigeons," said a boy of about nine, with total confidence.',
              '"Ghosts," said his sister, with even more.']),
            ("What did the woman who came out of the shop look like?",
             ["She was a young woman of perhaps twenty-five, in a raincoat two sizes too large, with a screwdriver "
              "behind one ear and a smear of black grease across her cheek."]),
            ("By how much was the clock running behind on its first day?",
             ["It's three minutes slow"]),
            ("How was Nell related to the old clockmaker?",
             ["She was the old man's great-niece, the granddaughter of a brother who had emigrated in 1962 "
              "and written home twice."]),
            ("What sorts of timepieces filled the shop?",
             ["There were long-case clocks standing like sentries, carriage clocks on shelves, cuckoo clocks with "
              "their doors shut tight, and hundreds of pocket watches laid out in shallow wooden drawers, each one "
              "tagged with a brown card label in a small, precise hand."]),
            ("What did the shop's repair ledger look like?",
             ["It was a heavy book bound in green cloth, its spine repaired with tape more than once, and it recorded "
              "every repair the shop had taken in since 1958."]),
            ("When was the ledger's final entry written?",
             ["The final entry was dated the fourteenth of October, two days before the old man died."]),
            ("How long had the old man been repairing the big clock?",
             ["He'd been working on it, on and off, for forty years."]),
            ("What did Dr. Raman bring to the shop for repair?",
             ["She had come in with a carriage clock that had belonged to her mother and had been silent since "
              "the millennium"]),
            ("Where else did Dr. Raman suggest looking for the owners' families?",
             ["Then the parish records. The electoral roll. The headstones, if it comes to that."]),
            ("How was the boy who searched old newspapers paid?",
             ["The boy who had suggested pigeons turned out to be extremely good at searching old newspaper archives "
              "online, and was paid in custard slices."]),
            ("How long did it take to trace the first owner?",
             ["The first success came after nine days."]),
            ("How did Mr. Fairweather damage his watch?",
             ["mainspring broken, case dented, owner says dropped it at his wedding",
              "Grandad dropped his watch during the first dance and trod on it."]),
            ("What did the Fairweather grandson do for a living?",
             ["The newspaper boy found a Fairweather grandson who ran a garage two towns over."]),
            ("Why did Mr. Fairweather never pick up his repaired watch?",
             ["She said he took it to be fixed and then never had the money to collect it, and by the time he did, "
              "he was too embarrassed to go back."]),
            ("What headline did the radio station give its story about the shop?",
             ["A local radio station ran a story with the headline *Ghost Clock Returns Lost Time*, which Nell hated "
              "and Mrs. Okafor had framed."]),
            ("How were the old clockmaker's repair notes written?",
             ["She learned to read his notes, which were written in a private shorthand of abbreviations and arrows."]),
            ("Where was the daughter of the owner of watch No. 3,027 found?",
             ["She had come to report on watch No. 3,027, whose owner had emigrated to Canada in 1966 and whose "
              "daughter had been found, after considerable effort, in a suburb of Winnipeg."]),
            ("What did Nell mostly argue with her great-uncle about?",
             ["Mostly I argue with him. He had very firm views on oil."]),
            ("What had Dr. Raman learned about delivering bad news kindly?",
             ["She had spent forty years telling people things they did not want to hear, and she had found that "
              "the kindest way to do it was usually the most direct."]),
            ("Who had originally brought in the engagement watch?",
             ["A woman in her eighties collected her own engagement watch, brought in by her fiancé in 1959 as a "
              "surprise to be engraved; he had died in an accident before he could collect it, and she had never "
              "known it existed."]),
            ("What was engraved on the engagement watch?",
             ["For M., for always"]),
            ("How many of the uncollected watches could not be traced to an owner?",
             ["Eleven watches had owners who could not be traced, no matter how hard anyone looked."]),
            ("How did Dr. Raman react after reading the note in the ledger's back cover?",
             ["Dr. Raman read it twice and then, to Nell's surprise, took out a handkerchief.",
              "It's the dust. You need to do something about the dust."]),
            ("What was the newspaper boy called?",
             ["whose name was Danny and who had become, over the summer, the shop's unpaid and unofficial "
              "research department"]),
            ("What did the little drawing in the ledger stand for?",
             ['"He drew the clock," she said.',
              "That's the big clock. One hand, because the other one was stuck."]),
            ("Why had the old man recorded those seven watches as belonging to everyone?",
             ["People had lost things in those weeks, or had to sell things, or had no time to come back for them, "
              "and the old man had quietly fixed their watches and written them down as belonging to everyone."]),
            ("What did the card Nell placed beside the seven watches say?",
             ["These belong to Harrow Lane",
              "If one of them is yours, come in and tell me about it. If not, come in anyway. "
              "The kettle is usually on."]),
            ("Which watch did the elderly visitor point to?",
             ["At last he pointed to the third watch from the left, a heavy silver pocket watch with a hunter case."]),
            ("Why did the visitor's father claim to have sold his watch?",
             ["He sold it in 1968 to pay for the roof after the flood."]),
            ("How much time does the father's pocket watch gain each day?",
             ["About 3.5 seconds a day fast, to be honest."]),
            ("How often did the elderly man come back to wind his father's watch?",
             ["he came back every Tuesday afterwards to wind it himself"]),
        ],
    ),
    "technical": (
        "technical_kestrel.md",
        [
            ("Which API does Kestrel use to serve objects?",
             ["serves them over an HTTP API that is compatible with the most common S3 operations"]),
            ("What background does the operator guide expect from its readers?",
             ["The guide assumes you are comfortable with a Linux shell, basic networking and YAML files.",
              "It does not assume any prior experience with object storage."]),
            ("How do you modify an object that is already stored?",
             ["Objects are immutable.",
              "To change an object, a client uploads a new version under the same key, and Kestrel keeps or "
              "discards the old version according to the bucket's retention policy."]),
            ("What rules must a bucket name follow?",
             ["Bucket names are global within a cluster, must be between 3 and 63 characters long, and may contain "
              "only lowercase letters, digits and hyphens."]),
            ("Does Kestrel support directories?",
             ['Keys may look like file paths, but Kestrel does not have directories: the slash is just a character, '
              'and "listing a folder" is really listing all keys that share a prefix.']),
            ("What should Kestrel zones correspond to?",
             ["Nodes are grouped into **zones**, which should correspond to failure domains you care about: "
              "separate racks, separate rooms or separate data centres."]),
            ("What happens when a cluster has fewer zones than copies of each object?",
             ["If a cluster has fewer zones than the replication factor, Kestrel spreads replicas across nodes "
              "within a zone and reports the placement as *degraded* in its health output."]),
            ("Why doesn't Kestrel store each object in its own file?",
             ["Small objects would then waste disk blocks and inodes, and large objects would be hard to repair "
              "piece by piece."]),
            ("Which checksum does a replica compute on incoming data?",
             ["Each replica appends the data to its open segment and computes a CRC-32C checksum per chunk."]),
            ("What happens if two metadata voters fail at once?",
             ["If two of three voters fail at the same time, the cluster stops accepting writes until at least one "
              "of them returns; reads of objects already cached by nodes may continue for a while."]),
            ("What hardware does each node of a large cluster need?",
             ["8 cores and 32 GB for clusters that store more than 50 TB or serve more than 2,000 requests per "
              "second"]),
            ("How much throughput is lost on older Linux kernels?",
             ["Older kernels work but lack the I/O interfaces that make large sequential writes efficient, and "
              "throughput drops by roughly 30% in our tests."]),
            ("Where does a node look for its configuration file?",
             ["Each node reads its configuration from `/etc/kestrel/kestrel.yaml`."]),
            ("What is the seeds list in the configuration for?",
             ["The `seeds` list names the voters of the metadata log.",
              "All nodes must list the same seeds, in any order."]),
            ("What should the status of a healthy new cluster show?",
             ["A healthy new cluster reports three nodes, three voters, one leader and a placement state of "
              "*optimal*."]),
            ("How many node failures can the default replication settings survive?",
             ["The defaults, 3 and 2, tolerate the loss of any one node without data loss or downtime."]),
            ("How fast does Kestrel add replicas after a bucket's replication factor is raised?",
             ["Kestrel then creates the additional replicas in the background at a limited rate, 50 MB/s per node "
              "by default, so that repair traffic does not starve client requests."]),
            ("Which segment size suits workloads with many small overwrites?",
             ["For workloads with many small overwrites, keep the default and consider a smaller segment size of "
              "64 MiB, so that each compaction job finishes quickly."]),
            ("What status code is returned once a hard quota is reached?",
             ["Hard quotas reject writes with status 507 once the limit is reached."]),
            ("How should human users authenticate in U.S. federal deployments?",
             ["In U.S. federal deployments and other regulated environments, you will usually be required to "
              "disable long-lived access keys for human users altogether and use tokens only."]),
            ("Which rules take precedence in bucket policies?",
             ["Deny rules always win over allow rules."]),
            ("What does a persistently non-zero count of under-replicated chunks indicate?",
             ["A value that stays above zero for more than an hour means the repairer cannot keep up or cannot "
              "reach a node."]),
            ("How many metadata leader changes are normal?",
             ["`kestrel_metadata_leader_changes_total`: a few per week is normal; several per hour suggests network "
              "trouble or an overloaded voter."]),
            ("How long does it take to rebalance data onto a newly added node?",
             ["Rebalancing a cluster of 100 TB onto one new node typically takes between 12 and 36 hours, depending "
              "on disk speed and the configured rebalance rate."]),
            ("When do the new features of a minor release become active?",
             ["new features stay disabled until every node runs the new version and an operator runs "
              "`kestrel cluster finalize-upgrade`"]),
            ("How long does the previous major version keep getting security fixes?",
             ["the previous major version remains supported with security fixes for 18 months after a new one is "
              "released"]),
            ("How should voters be restarted during an upgrade?",
             ["When upgrading, restart voters last, one at a time, and wait for `kestrel status` to report a stable "
              "leader before moving on.",
              "Restarting two voters at once will make the metadata log unavailable for the duration."]),
            ("Why is replication no substitute for backups?",
             ["Replication protects against hardware failure, not against mistakes.",
              "If someone deletes a bucket, all replicas of it are deleted too."]),
            ("Can an administrator delete an object under object lock?",
             ["Locked objects cannot be deleted before their retention date, even by administrators."]),
            ("What most often causes quorum errors after network changes?",
             ["Whether the replication port 7401 is blocked by a firewall between some pair of nodes. "
              "This is the most common cause after network changes."]),
            ("What early warning sign does a failing disk give?",
             ["a failing disk often shows up as high tail latency long before it reports errors"]),
            ("Why should clock skew be fixed rather than tolerated?",
             ["Fix the NTP configuration rather than raising the limit.",
              "Kestrel uses timestamps to order some metadata operations, and a node with a badly wrong clock can, "
              "in rare cases, make recent overwrites appear older than the objects they replaced."]),
            ("Can Kestrel be used as a file system?",
             ["Kestrel stores objects, not files, and it does not support partial overwrites, renames or locking in "
              "the way a file system does."]),
            ("Which compression algorithm does Kestrel use?",
             ["Compression is optional per bucket and uses the zstd algorithm at level 3 by default, which costs "
              "little CPU and saves 20% to 60% on typical text and log data."]),
            ("Since which version is encryption at rest always enabled?",
             ["Encryption at rest is always on since v2.0.0, using per-segment keys wrapped by a cluster key that "
              "you can keep in an external key management service."]),
            ("What is the unit of replication in Kestrel?",
             ["**Chunk**: a piece of an object of at most 4 MiB, the unit of replication and repair."]),
        ],
    ),
}


def main() -> None:
    write_sets(SETS, OUT)


if __name__ == "__main__":
    main()
