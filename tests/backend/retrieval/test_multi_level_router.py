"""MoG's router: soft labels (the paper's examples), training, cross-fitting and router files."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from backend.errors import InputError, ParameterError
from backend.progress import Progress
from backend.retrieval.multi import level_router as router_module
from backend.retrieval.multi.level_router import (
    SOFT_LABELS,
    Router,
    TrainReport,
    cross_fit,
    load_router,
    save_router,
    soft_labels,
    train_router,
)

BASE = {"retriever": "mog", "params": {"chunk_size": 64, "levels": 3}}
META = dict(
    base=BASE, embedder="all-MiniLM-L6-v2", embedder_fingerprint="abc123def456abc123", label="iou", soft="0.8/0.2"
)


# -- soft labels ---------------------------------------------------------------------


def test_soft_labels_paper_examples():
    assert soft_labels([0, 0.32, 0.11, 0.88, 0.45]).tolist() == [0, 0, 0, 0.8, 0.2]
    assert soft_labels([0.95, 0.07, 0.22, 0.11, 0.19]).tolist() == [0.8, 0, 0.2, 0, 0]


def test_soft_labels_07_03_setting():
    assert SOFT_LABELS == {"0.8/0.2": (0.8, 0.2), "0.7/0.3": (0.7, 0.3)}
    top, second = SOFT_LABELS["0.7/0.3"]
    assert soft_labels([0, 0.32, 0.11, 0.88, 0.45], top, second).tolist() == [0, 0, 0, 0.7, 0.3]


def test_soft_labels_ties_go_to_the_finer_level():
    assert soft_labels([0.5, 0.5, 0.5]).tolist() == [0.8, 0.2, 0]
    assert soft_labels([0.1, 0.9, 0.3, 0.3]).tolist() == [0, 0.8, 0.2, 0]


def test_soft_labels_zero_similarities():
    assert soft_labels([0, 0, 0]).tolist() == [0, 0, 0]
    assert soft_labels([-0.2, 0, -1]).tolist() == [0, 0, 0]
    assert soft_labels([0, 0.4, 0]).tolist() == [0, 0.8, 0]  # no runner-up when the rest retrieve nothing
    assert soft_labels([0.7]).tolist() == [0.8]


@pytest.mark.parametrize(
    ("sims", "top", "second"), [([], 0.8, 0.2), ([0.1, float("nan")], 0.8, 0.2), ([0.1, 0.2], 0.2, 0.8)]
)
def test_soft_labels_refuse_bad_input(sims, top, second):
    with pytest.raises(ParameterError):
        soft_labels(sims, top, second)


# -- training ------------------------------------------------------------------------


def clusters(n_per: int, dim: int = 32, levels: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit vectors around ``levels`` fixed random centres; cluster c's best level is c, the next one second.

    ``seed`` draws the points' noise only, so another seed gives fresh points of the same clusters.
    """
    centres = np.random.default_rng(12345).normal(size=(levels, dim))
    rng = np.random.default_rng(seed)
    which = np.repeat(np.arange(levels), n_per)
    x = centres[which] + 0.3 * rng.normal(size=(len(which), dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = np.zeros((len(which), levels))
    y[np.arange(len(which)), which] = 0.8
    y[np.arange(len(which)), (which + 1) % levels] = 0.2
    return x, y, which


def test_training_learns_separable_clusters():
    x, y, _ = clusters(40)
    router, report = train_router(x, y, epochs=60, **META)
    assert isinstance(router, Router) and isinstance(report, TrainReport)
    assert report.questions == 120 and report.dropped == 0 and report.validation == 24
    assert report.epochs == 60 and len(report.train_loss) == 60 and len(report.val_loss) == 60
    assert report.train_loss[-1] < report.train_loss[0] and report.val_loss[-1] < report.val_loss[0]
    assert report.label_histogram == (40, 40, 40)
    assert router.meta.levels == 3 and router.meta.dim == 32 and router.meta.hidden == 128
    assert router.meta.base == BASE and router.meta.label == "iou" and router.meta.soft == "0.8/0.2"
    # Fresh points of the same clusters: the router's top level is the cluster's best level.
    fresh, _, which = clusters(30, seed=7)
    weights = router.predict(fresh)
    assert weights.shape == (90, 3) and weights.dtype == np.float64
    assert np.all((weights > 0) & (weights < 1))
    assert np.mean(weights.argmax(axis=1) == which) >= 0.9
    assert router.predict(fresh[0]).shape == (3,)
    assert np.allclose(router.predict(fresh[0]), weights[0], rtol=0, atol=1e-12)


def test_training_is_deterministic_for_a_seed():
    x, y, _ = clusters(10)
    a, _ = train_router(x, y, epochs=5, seed=3)
    b, _ = train_router(x, y, epochs=5, seed=3)
    c, _ = train_router(x, y, epochs=5, seed=4)
    assert np.array_equal(a.predict(x), b.predict(x))
    assert not np.array_equal(a.predict(x), c.predict(x))


def test_training_neither_reads_nor_changes_torch_global_random_state():
    import torch

    x, y, _ = clusters(5)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a, _ = train_router(x, y, epochs=2)
    assert torch.equal(torch.rand(3), expected)
    torch.manual_seed(456)
    b, _ = train_router(x, y, epochs=2)
    assert np.array_equal(a.predict(x), b.predict(x))


def test_all_zero_rows_are_dropped_and_small_sets_have_no_validation():
    x, y, _ = clusters(2)  # 6 rows
    y[:3] = 0
    _, report = train_router(x, y, epochs=3)
    assert (report.questions, report.dropped, report.validation, report.val_loss) == (3, 3, 0, ())


def test_too_few_usable_rows():
    x, y, _ = clusters(2)
    y[1:] = 0
    with pytest.raises(ParameterError, match="at least 2 questions whose answer some level retrieves, got 1"):
        train_router(x, y)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epochs": 0},
        {"epochs": 2.5},
        {"lr": 0},
        {"hidden": 0},
        {"batch_size": 0},
        {"val_fraction": 1.0},
        {"label": "bleu"},
        {"soft": "0.9/0.1"},
        {"base": {"f": object()}},
    ],
)
def test_bad_training_parameters(kwargs):
    x, y, _ = clusters(3)
    with pytest.raises(ParameterError):
        train_router(x, y, **kwargs)


def test_mismatched_shapes():
    x, y, _ = clusters(3)
    with pytest.raises(ParameterError, match="9 query vectors but 8 label rows"):
        train_router(x, y[:8])
    router, _ = train_router(x, y, epochs=1)
    with pytest.raises(ParameterError, match="dimension 32"):
        router.predict(np.zeros((2, 31)))


def test_progress_is_called_each_epoch_and_may_cancel():
    x, y, _ = clusters(3)
    calls = []
    train_router(x, y, epochs=4, progress=Progress(counts=lambda done, total: calls.append((done, total))))
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]

    class Stop(Exception):
        pass

    def cancel(done: int, total: int) -> None:
        raise Stop

    with pytest.raises(Stop):
        train_router(x, y, epochs=4, progress=Progress(counts=cancel))


# -- cross-fitting -------------------------------------------------------------------


def test_cross_fit_prediction_ignores_the_rows_own_label():
    x, y, _ = clusters(6)
    kwargs = dict(folds=3, seed=1, epochs=5)
    before = cross_fit(x, y, **kwargs)
    assert before.shape == (18, 3)
    changed = y.copy()
    changed[0] = [0, 0, 0.8] if y[0, 2] == 0 else [0.8, 0, 0]
    after = cross_fit(x, changed, **kwargs)
    assert np.array_equal(after[0], before[0])
    assert not np.array_equal(after, before)  # the other folds did see row 0


def test_cross_fit_predicts_unlabelled_rows_and_falls_back_to_uniform():
    x, y, _ = clusters(4)
    y[:2] = 0
    weights = cross_fit(x, y, folds=3, epochs=2)
    assert weights.shape == (12, 3) and np.all((weights > 0) & (weights < 1))
    y[:] = 0
    y[5] = [0.8, 0.2, 0]
    assert np.array_equal(cross_fit(x, y, folds=3, epochs=2), np.full((12, 3), 0.5))  # one usable row: no fold trains
    y[7] = [0, 0.8, 0.2]
    # The folds holding row 5 or row 7 have a single usable row outside them; a fold holding neither trains.
    weights = cross_fit(x, y, folds=3, epochs=2)
    assert np.all(weights[[5, 7]] == 0.5) and not np.all(weights == 0.5)


def test_cross_fit_reports_progress_over_all_folds():
    x, y, _ = clusters(4)
    calls = []
    cross_fit(x, y, folds=2, epochs=3, progress=Progress(counts=lambda done, total: calls.append((done, total))))
    assert calls == [(i, 6) for i in range(1, 7)]


# -- router files --------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained() -> tuple[Router, np.ndarray]:
    x, y, _ = clusters(5)
    router, _ = train_router(x, y, epochs=3, **META)
    return router, x


def test_save_load_round_trip(tmp_path, trained):
    router, x = trained
    path = save_router(router, tmp_path / "sub" / "mog.router.npz")
    assert path == tmp_path / "sub" / "mog.router.npz" and path.is_file()
    loaded = load_router(path, levels=3, base=BASE, embedder_fingerprint=META["embedder_fingerprint"])
    assert np.array_equal(loaded.predict(x), router.predict(x))
    assert loaded.meta == router.meta and loaded.report == router.report
    plain = save_router(router, tmp_path / "any-name")  # no suffix appended
    assert plain.name == "any-name" and load_router(plain).meta == router.meta


def test_load_refuses_another_embedder(tmp_path, trained):
    path = save_router(trained[0], tmp_path / "r.router.npz")
    with pytest.raises(InputError) as info:
        load_router(path, embedder_fingerprint="ffff0000")
    assert str(info.value) == (
        f"router file {path} was trained for embedder all-MiniLM-L6-v2 (fingerprint abc123def456…), "
        "not fingerprint ffff0000 — retrain it with 'python -m backend router train'"
    )


def test_load_refuses_other_levels(tmp_path, trained):
    path = save_router(trained[0], tmp_path / "r.router.npz")
    with pytest.raises(InputError, match=r"has 3 levels, this retriever has 5"):
        load_router(path, levels=5)
    other = {"retriever": "mog", "params": {"chunk_size": 50, "levels": 3}}
    with pytest.raises(InputError) as info:
        load_router(path, base=other)
    message = str(info.value)
    assert message.startswith(
        f"router file {path} was trained on levels of mog(chunk_size=64, …), not mog(chunk_size=50, …)"
    )
    assert "\n" not in message


def test_load_refuses_a_newer_format(tmp_path, trained):
    path = save_router(trained[0], tmp_path / "r.router.npz")
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    header = json.loads(arrays["header"].tobytes())
    header["version"] = 2
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    newer = tmp_path / "newer.router.npz"
    with open(newer, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(InputError, match=r"has format version 2, this Chunk Lab reads up to 1"):
        load_router(newer)


def write_npz(path, **arrays) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    path.write_bytes(buf.getvalue())


@pytest.mark.parametrize("kind", ["missing", "garbage", "npy", "other npz", "truncated", "pickle", "bad shape"])
def test_load_refuses_bad_files(tmp_path, trained, kind):
    path = tmp_path / "bad.router.npz"
    if kind == "garbage":
        path.write_bytes(b"not a zip file at all")
    elif kind == "npy":
        np.save(tmp_path / "a.npy", np.zeros(3))
        path = tmp_path / "a.npy"
    elif kind == "other npz":
        write_npz(path, x=np.zeros(3))
    elif kind == "truncated":
        data = save_router(trained[0], tmp_path / "good.npz").read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind in ("pickle", "bad shape"):
        with np.load(save_router(trained[0], tmp_path / "good.npz")) as npz:
            arrays = {name: npz[name] for name in npz.files}
        if kind == "pickle":
            arrays["w1"] = np.array([{"evil": 1}, None], dtype=object)
        else:
            arrays["w2"] = arrays["w2"][:, :5]
        write_npz(path, **arrays)
    with pytest.raises(InputError) as info:
        load_router(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_saved_file_holds_no_pickle(tmp_path, trained):
    path = save_router(trained[0], tmp_path / "r.router.npz")
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == ["b1.npy", "b2.npy", "header.npy", "w1.npy", "w2.npy"]
    with np.load(path, allow_pickle=False) as npz:
        assert all(not npz[name].dtype.hasobject for name in npz.files)


def test_load_refuses_an_archive_that_unpacks_too_big(tmp_path, trained, monkeypatch):
    path = save_router(trained[0], tmp_path / "r.router.npz")
    monkeypatch.setattr(router_module, "MAX_FILE_BYTES", 1000)
    with pytest.raises(InputError, match=r"unpacks to \d+ bytes, over the 1000 a router may have"):
        load_router(path)
