"""The Optuna study of a tuning run: in a journal file in the output folder, named by what the run asks.

The study lives in ``out/study.journal`` (Optuna's :class:`~optuna.storages.journal.JournalStorage`
on a :class:`~optuna.storages.journal.JournalFileBackend`: an append-only log, safe to read while
it is written, and whole after a kill but for its last record). Its name is a digest of the
request (the documents' content hashes, the question set, families, objective, constraints,
seed, baseline), so reopening the same request there continues the same study
(``load_if_exists``) and another request in the same folder is refused by :func:`open_study`'s
caller rather than mixed in. One objective: TPE (seeded); with a secondary objective, NSGA-II
(seeded) maximising the first and minimising the second.

Resume: a trial a kill left ``RUNNING`` is marked failed and its parameters are enqueued again
(:func:`recover`), so it is retried first; complete and pruned trials are never run again.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any, Mapping

import optuna
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState

from backend.tune.result import JOURNAL_FILE

__all__ = ["study_name", "open_study", "recover", "BASELINE_ATTR", "CONFIG_ATTR"]

BASELINE_ATTR = "baseline"  # user attribute of the enqueued baseline trial
CONFIG_ATTR = "config"  # user attribute: the configuration's spec (every trial)


def study_name(key: Mapping[str, Any]) -> str:
    """``tune-<16 hex>``: a digest of the request's identifying fields (JSON, keys sorted)."""
    text = json.dumps(key, sort_keys=True, ensure_ascii=False, default=str)
    return "tune-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def open_study(out: Path, name: str, *, seed: int, two_objectives: bool,
               pruner: optuna.pruners.BasePruner | None = None) -> optuna.Study:
    """The study ``name`` in ``out/study.journal``, created or reopened.

    Args:
        out: The output folder (made if missing).
        name: :func:`study_name` of the request.
        seed: Seeds the sampler.
        two_objectives: NSGA-II over (maximise objective, minimise secondary); else TPE.
        pruner: The pruner (single objective only; Optuna's pruners do not serve two objectives).
    """
    out.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(str(out / JOURNAL_FILE)))
    if two_objectives:
        return optuna.create_study(storage=storage, study_name=name, load_if_exists=True,
                                   sampler=optuna.samplers.NSGAIISampler(seed=seed),
                                   directions=["maximize", "minimize"])
    # multivariate + group: TPE models each family's parameters jointly, within the family chosen (the space is
    # conditional); both are marked experimental in Optuna 5.0, whose warning says nothing to a user.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)
    return optuna.create_study(storage=storage, study_name=name, load_if_exists=True, sampler=sampler,
                               direction="maximize",
                               pruner=pruner or optuna.pruners.NopPruner())


def recover(study: optuna.Study) -> list[int]:
    """Mark trials a kill left running as failed and enqueue their parameters again; returns their numbers."""
    stuck = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for t in stuck:
        study.tell(t.number, state=TrialState.FAIL)
        study.enqueue_trial(dict(t.params), user_attrs={k: v for k, v in t.user_attrs.items()
                                                       if k in (BASELINE_ATTR, CONFIG_ATTR)},
                            skip_if_exists=False)
    return [t.number for t in stuck]
