#!/usr/bin/env python
"""Fuzz ``packboost.load_model`` for a bounded time.

The invariant: for *any* bytes, ``load_model`` either returns an estimator or
raises :class:`packboost.model_file.ModelFileError`; an estimator it returns
predicts finite values of the right shape, reports its importances, saves
and reloads to the same predictions, and can be trained further. Anything
else -- another exception, a hang, a crash inside a kernel -- is a finding.

Inputs are seed model files (written here, plus the committed fixtures in
``tests/data``) changed by *structured* mutations: metadata values replaced
or deleted, arrays given other values, dtypes, shapes or lengths, arrays
dropped or added, and then serialised with a valid checksum, so that the
mutations reach the checks behind the checksum; raw byte flips with and
without a recomputed checksum, and raw fuzzer bytes, cover the container.

Engines:

* ``atheris`` (``pip install atheris``): coverage-guided (libFuzzer over the
  Python bytecode of packboost, instrumented at import); the fuzzer's bytes
  choose the seed and drive the mutations. A finding is written as
  ``crash-*`` into ``--artifacts`` by libFuzzer and the run exits non-zero.
* ``random``: the same mutations drawn from a NumPy generator; needs nothing
  but packboost. A finding is written as ``finding-*.pbm`` into
  ``--artifacts``; the run goes on to the time limit and exits 1.

``auto`` (the default) uses atheris when it is installed.

Usage::

    python ci/fuzz_load_model.py --seconds 60              # from the repository root
    python ci/fuzz_load_model.py --engine random --seconds 300 --seed 7
    python ci/fuzz_load_model.py --replay fuzz-artifacts/finding-*.pbm
"""

from __future__ import annotations

import argparse
import collections
import copy
import faulthandler
import hashlib
import os
import pathlib
import re
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]

# JSON values a mutation may put into the metadata.
JSON_VALUES = [None, True, False, 0, 1, -1, 2, 3, 63, 64, 65, 255, 256, 65535, 65536,
               2**31 - 1, 2**31, -2**31, 2**63, 10**30, 0.0, -0.0, 0.5, 1.5, -1e300, 1e300,
               float("nan"), float("inf"), float("-inf"), "", "x", "cpu", "equal", "realized",
               "PackBoostRegressor", "PackBoostClassifier", "packboost-model", [], [0], [1, 2],
               ["a", "b"], ["a", "a"], {}, {"max_bins": 255, "prebinned": False},
               # classes_dtype / classes_type values (model_io._save_classes)
               "<U3", "|S3", "|O", "<M8[D]", "<m8[s]", "<f2", "<i8", "|b1", "V8", "<U99999",
               "int", "float", "bool", "bytes", "str", [1, 2], [True, False], ["\u4e00", "b"]]
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64"]


# ----------------------------------------------------------------------------- seeds


def make_seeds(directory: pathlib.Path) -> list[bytes]:
    """Model files of every kind the writer produces, small enough to load fast."""
    from packboost import PackBoostClassifier, PackBoostRegressor
    from packboost.datasets import make_numerai_like

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = np.nan_to_num(X[:, 0]) + rng.normal(size=300)
    era = rng.integers(0, 6, size=300)
    models = [
        PackBoostRegressor(n_estimators=3, pack_size=2, max_depth=3, min_samples_leaf=5,
                           random_state=0).fit(X, y, era=era),
        PackBoostRegressor(n_estimators=6, pack_size=1, max_depth=2, max_bins=8,
                           random_state=1).fit(X, y, era=era, eval_set=[(X, y, era)],
                                               early_stopping_rounds=2),
        PackBoostClassifier(n_estimators=2, pack_size=3, max_depth=2,
                            random_state=2).fit(X, np.where(y > 0, "up", "down")),
        PackBoostClassifier(n_estimators=2, max_depth=1, random_state=3).fit(X, y > 0),
        PackBoostRegressor(n_estimators=1, max_depth=0).fit(X, y),
    ]
    # Labels of every kind a file stores (model_io._save_classes).
    for index, labels in enumerate([
            np.array([b"down", b"up"]), np.array(["2020-01-01", "2021-01-01"], "datetime64[D]"),
            np.array([3, 10**20], dtype=object), np.array([-1.0, 1.0], dtype=np.float16)]):
        y_labels = np.empty(300, dtype=labels.dtype)
        y_labels[:] = labels[0]
        y_labels[y > 0] = labels[1]
        models.append(PackBoostClassifier(n_estimators=1, max_depth=2,
                                          random_state=5 + index).fit(X, y_labels))
    numerai = make_numerai_like(n_rows=500, n_features=5, n_eras=10, random_state=0)
    models.append(PackBoostRegressor(n_estimators=2, max_depth=2, random_state=4).fit(
        numerai.X.astype(np.int8), numerai.y, era=numerai.era))
    seeds = []
    for index, model in enumerate(models):
        path = directory / f"seed{index}.pbm"
        model.save_model(path)
        seeds.append(path.read_bytes())
    seeds += [path.read_bytes() for path in sorted((REPO / "tests" / "data").glob("*.pbm"))]
    return seeds


# ----------------------------------------------------------------------------- mutations


class Choices:
    """Random choices from a NumPy generator or from atheris' FuzzedDataProvider.

    With a provider, its bytes decide (so that coverage guides the choices);
    once they run out, a generator seeded by those bytes takes over, rather
    than every later choice being the first option.
    """

    def __init__(self, rng=None, provider=None, data: bytes = b""):
        self.provider = provider
        self.rng = rng if rng is not None else np.random.default_rng(
            int.from_bytes(hashlib.sha256(data).digest()[:8], "little"))

    def _provided(self) -> bool:
        return self.provider is not None and self.provider.remaining_bytes() > 0

    def integer(self, low: int, high: int) -> int:
        """An int in [low, high]."""
        if self._provided():
            return self.provider.ConsumeIntInRange(low, high)
        return int(self.rng.integers(low, high + 1))

    def pick(self, items):
        items = list(items)
        return items[self.integer(0, len(items) - 1)]

    def number(self) -> float:
        if self._provided():
            return self.provider.ConsumeRegularFloat() if self.integer(0, 3) else \
                self.pick([np.nan, np.inf, -np.inf, 0.0])
        return self.pick([float(self.rng.normal() * 10 ** self.integer(0, 12)), np.nan,
                          np.inf, -np.inf, 0.0, -1.0])

    def raw_bytes(self, count: int) -> bytes:
        if self._provided():
            return self.provider.ConsumeBytes(count)
        return self.rng.bytes(count)


def _metadata_paths(value, prefix=()):
    """Every (path of keys) to a value inside the metadata dict."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _metadata_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:8]):
            yield (*prefix, index)
            yield from _metadata_paths(item, (*prefix, index))


def _locate(metadata, path):
    target = metadata
    for key in path[:-1]:
        target = target[key]
    return target, path[-1]


def mutate_structure(metadata: dict, arrays: dict, choices: Choices) -> None:
    """One structured change of a parsed model file, in place."""
    action = choices.integer(0, 9)
    if action <= 2:  # replace a metadata value
        paths = list(_metadata_paths(metadata))
        target, key = _locate(metadata, choices.pick(paths))
        target[key] = copy.deepcopy(choices.pick(JSON_VALUES))
    elif action == 3:  # delete a metadata entry
        paths = [path for path in _metadata_paths(metadata) if not isinstance(path[-1], int)]
        target, key = _locate(metadata, choices.pick(paths))
        del target[key]
    elif action == 4 and arrays:  # drop an array, or add one
        if choices.integer(0, 1):
            del arrays[choices.pick(sorted(arrays))]
        else:
            arrays[choices.pick(["classes", "round_layer_offsets", "extra", "node_extra"])] = \
                np.arange(choices.integer(0, 5), dtype=choices.pick(DTYPES))
    elif arrays:  # change an array
        name = choices.pick(sorted(arrays))
        arrays[name] = mutate_array(arrays[name], choices)


def mutate_array(array: np.ndarray, choices: Choices) -> np.ndarray:
    array = array.copy()
    action = choices.integer(0, 7)
    if action <= 2 and array.size:  # change some values
        for _ in range(choices.integer(1, 3)):
            index = choices.integer(0, array.size - 1)
            if array.dtype.kind == "f":
                array.flat[index] = choices.number()
            elif array.dtype.kind == "b":
                array.flat[index] = not array.flat[index]
            else:
                info = np.iinfo(array.dtype)
                candidates = [info.min, info.max, 0, -1, 1, array.size, array.size + 1,
                              int(array.flat[index]) + 1, int(array.flat[index]) - 1]
                value = choices.pick([value for value in candidates
                                      if info.min <= value <= info.max])
                array.flat[index] = value
        return array
    if action == 3:  # another dtype
        return array.astype(choices.pick(DTYPES), copy=False)
    if action == 4:  # shorter or longer
        size = array.shape[0] if array.ndim else 1
        new = choices.integer(0, size + 2)
        flat = array.reshape(-1)
        return np.resize(flat, new) if new else flat[:0]
    if action == 5:  # another shape
        return array.reshape(1, -1) if array.ndim == 1 else array.reshape(-1)
    if action == 6:  # reordered
        return array[::-1].copy()
    return np.zeros_like(array)


def build_input(seeds: list[bytes], choices: Choices) -> bytes:
    """A candidate model file: a seed changed structurally or at the byte level."""
    from packboost.model_file import dumps, loads

    data = choices.pick(seeds)
    mode = choices.integer(0, 9)
    if mode <= 6:  # structured, re-serialised with a valid checksum
        metadata, arrays = loads(data)
        for _ in range(choices.integer(1, 4)):
            try:
                mutate_structure(metadata, arrays, choices)
            except (KeyError, IndexError, TypeError, ValueError):
                pass  # the mutation did not apply (e.g. nothing left to delete)
        try:
            return dumps(metadata, arrays)
        except (TypeError, ValueError):
            return data
    data = bytearray(data)
    for _ in range(choices.integer(1, 8)):  # byte flips
        position = choices.integer(0, len(data) - 1)
        data[position] ^= 1 << choices.integer(0, 7)
    if mode <= 8:  # fix the checksum up: the flips reach the header checks
        body = bytes(data[:-32])
        data = bytearray(body + hashlib.sha256(body).digest())
    if mode == 9 and choices.integer(0, 1):
        data = data[: choices.integer(0, len(data))] + choices.raw_bytes(choices.integer(0, 64))
    return bytes(data)


# ----------------------------------------------------------------------------- the target


class Finding(AssertionError):
    """The invariant was broken."""


class Target:
    """Loads candidate files and checks what a loaded model does."""

    def __init__(self, workdir: pathlib.Path):
        from packboost import load_model
        from packboost.model_file import ModelFileError

        self.load_model, self.ModelFileError = load_model, ModelFileError
        self.path = workdir / "candidate.pbm"
        self.saved = workdir / "saved.pbm"
        self.current = workdir / "current-input.pbm"  # what a crash was running on
        self.rng = np.random.default_rng(0)
        self.outcomes = collections.Counter()
        self.rounds = 0

    def __call__(self, data: bytes) -> None:
        self.path.write_bytes(data)
        try:
            model = self.load_model(self.path)
        except self.ModelFileError as error:
            self.outcomes[_category(str(error))] += 1
            return
        self.outcomes["loaded"] += 1
        self.current.write_bytes(data)  # kernels run below: keep the input of a crash
        self.exercise(model)

    def exercise(self, model) -> None:
        n_features = model.n_features_in_
        X = self.rng.normal(size=(64, n_features)) * 3
        X[self.rng.random(X.shape) < 0.2] = np.nan
        names = getattr(model, "feature_names_in_", None)
        if names is not None:
            from packboost._inputs import NamedMatrix
            X = NamedMatrix(X, names)
        if hasattr(model, "predict_proba"):
            prediction = model.predict_proba(X)[:, 1]
            if not ((prediction >= 0) & (prediction <= 1)).all():
                raise Finding(f"probabilities outside [0, 1]: {prediction[:5]}")
        else:
            prediction = model.predict(X)
        if prediction.shape != (64,) or not np.isfinite(prediction).all():
            raise Finding(f"bad prediction: shape {prediction.shape}, {prediction[:5]}")
        if model.n_iter_:
            model.predict(X, iteration_range=(0, model.n_iter_ // 2))
        for kind in ("gain", "split", "des"):
            values = model.get_feature_importance(kind)
            if values.shape != (n_features,):
                raise Finding(f"importance of shape {values.shape}")
        model.save_model(self.saved)
        again = self.load_model(self.saved)
        again_prediction = (again.predict_proba(X)[:, 1] if hasattr(again, "predict_proba")
                            else again.predict(X))
        if not np.array_equal(again_prediction, prediction):
            raise Finding("a saved and reloaded model predicts differently")
        if hasattr(model, "classes_") and (again.classes_.dtype != model.classes_.dtype
                                           or again.classes_.tolist() != model.classes_.tolist()):
            raise Finding(f"classes changed through save and load: {model.classes_!r} -> "
                          f"{again.classes_!r}")
        self.rounds += 1
        if self.rounds % 25 == 1:  # continue training now and then (slower)
            y = self.rng.normal(size=64)
            if hasattr(model, "classes_"):
                y = model.classes_[(y > 0).astype(np.intp)]  # any label dtype
            params = dict(n_estimators=1, pack_size=model.ensemble_.pack_size, n_jobs=1)
            type(model)(**params).fit(X, y, init_model=model)


def _category(message: str) -> str:
    """A ModelFileError message without paths and numbers, to count kinds of refusal."""
    message = re.sub(r"'[^']*candidate\.pbm': ", "", message)
    return re.sub(r"\d+", "N", message)[:70]


# ----------------------------------------------------------------------------- engines


def run_random(target, seeds, seconds, artifacts: pathlib.Path, seed: int) -> int:
    rng = np.random.default_rng(seed)
    choices = Choices(rng=rng)
    deadline = time.monotonic() + seconds
    findings = iterations = 0
    while time.monotonic() < deadline:
        data = build_input(seeds, choices)
        iterations += 1
        try:
            target(data)
        except Exception:  # noqa: BLE001 - every other exception is a finding
            findings += 1
            name = artifacts / f"finding-{hashlib.sha256(data).hexdigest()[:16]}.pbm"
            name.write_bytes(data)
            print(f"\nFINDING #{findings} (input saved as {name}):", file=sys.stderr)
            traceback.print_exc()
    report(target, iterations, seconds, findings)
    return 1 if findings else 0


def run_atheris(target, seeds, seconds, artifacts: pathlib.Path, extra_args) -> int:
    import atheris

    started = time.monotonic()

    def test_one_input(data: bytes) -> None:
        elapsed = time.monotonic() - started
        if elapsed >= seconds:
            # The time limit is kept here rather than by libFuzzer, which ends the
            # process without running Python's exit handlers: report, then end.
            report(target, None, elapsed, 0)
            os._exit(0)
        provider = atheris.FuzzedDataProvider(data)
        choices = Choices(provider=provider, data=data)
        if len(data) > 8 and data[0] % 8 == 0:
            candidate = data[1:]  # the fuzzer's own bytes as a file
        else:
            candidate = build_input(seeds, choices)
        target(candidate)

    # On a finding libFuzzer prints the traceback, writes the input as crash-*
    # into the artifacts folder and exits non-zero.
    args = [sys.argv[0], f"-max_total_time={seconds + 60}", "-timeout=60",
            "-rss_limit_mb=4096", f"-artifact_prefix={artifacts}/", *extra_args]
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()
    return 0


def report(target, iterations, seconds, findings) -> None:
    loaded = target.outcomes["loaded"]
    total = sum(target.outcomes.values())
    findings = "see above" if findings is None else findings
    print(f"\nfuzz_load_model: {total} inputs in {seconds:.0f} s; {loaded} loaded and "
          f"exercised, {total - loaded} refused with ModelFileError; findings: {findings}",
          flush=True)
    for message, count in target.outcomes.most_common(12):
        if message != "loaded":
            print(f"  {count:7d}  {message}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60, help="time limit (default 60)")
    parser.add_argument("--engine", choices=("auto", "atheris", "random"), default="auto")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random engine")
    parser.add_argument("--artifacts", default="fuzz-artifacts",
                        help="where findings are written (default ./fuzz-artifacts)")
    parser.add_argument("--replay", nargs="+", metavar="FILE",
                        help="run the target on saved inputs instead of fuzzing")
    args, extra = parser.parse_known_args(argv)
    faulthandler.enable()  # a crash in a kernel prints where it happened
    warnings.simplefilter("ignore")  # casts of forged values, feature-name warnings

    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401
            engine = "atheris"
        except ImportError:
            engine = "random"
            print("atheris is not installed: using the random-mutation engine")
    if engine == "atheris":
        import atheris
        with atheris.instrument_imports(include=["packboost"]):
            import packboost  # noqa: F401
            import packboost.binning  # noqa: F401
            import packboost.ensemble  # noqa: F401
            import packboost.model_file  # noqa: F401
            import packboost.model_io  # noqa: F401
            import packboost.sklearn  # noqa: F401
    import packboost

    artifacts = pathlib.Path(args.artifacts).resolve()
    artifacts.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pb-fuzz-") as workdir:
        workdir = pathlib.Path(workdir)
        target = Target(workdir)
        if args.replay:
            failures = 0
            for name in args.replay:
                try:
                    target(pathlib.Path(name).read_bytes())
                    print(f"{name}: ok")
                except Exception:  # noqa: BLE001
                    failures += 1
                    print(f"{name}: FINDING")
                    traceback.print_exc()
            return 1 if failures else 0
        seeds = make_seeds(workdir)
        print(f"fuzz_load_model: packboost {packboost.__version__} from "
              f"{pathlib.Path(packboost.__file__).parent}, engine {engine}, {len(seeds)} seeds, "
              f"{args.seconds} s, findings into {artifacts}")
        sys.stdout.flush()
        if engine == "atheris":
            return run_atheris(target, seeds, args.seconds, artifacts, extra)
        return run_random(target, seeds, args.seconds, artifacts, args.seed)


if __name__ == "__main__":
    sys.exit(main())
