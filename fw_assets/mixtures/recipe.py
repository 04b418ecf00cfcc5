"""Mixture recipes: one YAML file per training mixture (format in docs/recipes.md, examples beside this
module). `load_recipe` parses and checks one; every mistake is a `RecipeError` naming the file and
the key.
"""

import hashlib
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import yaml

from fw_assets.mixtures.megatron.blended_megatron_dataset_config import parse_split
from fw_assets.mixtures.reweighting import MAX_MULTIPLIER
from fw_assets.paths import NAME_RULE, is_safe_name
from fw_assets.sampling_policy import SEED_POLICY

# Megatron-Core 0.16's `unique_identifiers` of `--tokenizer-type NullTokenizer --vocab-size N`
NULL_TOKENIZER_CLASS = "megatron.core.tokenizers.text.models.default_tokenizer.DefaultTokenizerText"
DEFAULT_SEED = 1234
EXPORTS = ("packed",)
# Megatron's GPTDataset keeps offsets into documents in int32: a sample longer than that cannot be addressed.
MAX_SEQ_LENGTH = 2**31 - 2
# A recipe is a few kilobytes and at most five levels deep (the shipped ones: under 2 KB). Beyond
# these a file is refused before it is parsed: PyYAML's parser takes time growing with the square of
# the nesting, and building the values recurses once per level (5,000 levels: a RecursionError).
MAX_RECIPE_BYTES = 64 * 1024
MAX_RECIPE_DEPTH = 16
# A schedule's stages are each a blend with its own flags and caches; reading the recipe lists them.
MAX_SCHEDULE_STAGES = 1_000


class _RecipeLoader(yaml.SafeLoader):
    """YAML as PyYAML reads it (YAML 1.1), and numbers in exponent notation as people write token
    counts: `1e12`, `1.5e6`, `2.5E-3`. YAML 1.1 reads those as strings (it wants a dot and a signed
    exponent, `1.0e+12`); YAML 1.2 reads them as floats, as here."""


_RecipeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+\Z", re.ASCII),
    list("-+0123456789."),
)


class RecipeError(ValueError):
    """A recipe that cannot be planned: the message names the recipe file and the key."""

    def __init__(self, path: Path, key: str, problem: str) -> None:
        super().__init__(f"recipe {path}: {key}: {problem}")
        self.path, self.key, self.problem = path, key, problem


def _checked_name(path: Path, key: str, name: str) -> str:
    """Recipe stems, tokenizer, source and phase names become folder and file names: checked when
    the recipe is read, so that no path is built from a name like `../demo/main`."""
    if not is_safe_name(name):
        raise RecipeError(path, key, f"{name!r} {NAME_RULE}")
    return name


REWEIGHT_BY = ("probe_loss",)
DEFAULT_PROBE = "builtin"  # fw_assets.probe.probes.BUILTIN: the probe that needs no model


@dataclass(frozen=True)
class Reweight:
    """`reweight:` of a source: its documents repeated by their probe loss, by the rule of
    fw_assets.mixtures.reweighting (docs/probe-losses.md#the-rule), in the buckets given (default:
    all the source's)."""

    max_multiplier: float
    drop_top_share: float
    probe: str = DEFAULT_PROBE
    buckets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Source:
    """Tokenized files of some buckets × dumps (dump globs; None = every dump present)."""

    name: str
    buckets: tuple[str, ...]
    dumps: tuple[str, ...] | None
    weight: float | None  # None: the source's share of all the sources' tokens
    reweight: Reweight | None = None


@dataclass(frozen=True)
class Stage:
    """One Megatron blend: `tokens` training tokens drawn at temperature T."""

    name: str
    tokens: int
    temperature: float


def cosine(start: float, end: float, progress: float) -> float:
    """Slow at both ends, fastest in the middle (half a cosine period)."""
    return end + (start - end) * (1 + math.cos(math.pi * progress)) / 2


def linear(start: float, end: float, progress: float) -> float:
    """Evenly from start to end."""
    return start + (end - start) * progress


# Every schedule shape a recipe may name: the temperature at `progress` (0 to 1) through a phase.
# A new shape is one function and one entry here; a recipe naming another shape is refused.
SCHEDULE_SHAPES = {"cosine": cosine, "linear": linear}


@dataclass(frozen=True)
class Schedule:
    """A temperature moving from `start` to `end` over `stage_count` equal shares of a phase (the
    recipe's `temperature.stages`)."""

    start: float
    end: float
    shape: str  # a key of SCHEDULE_SHAPES
    stage_count: int

    def at(self, stage: int) -> float:
        """T at the middle of stage `stage`'s share (0-based)."""
        return SCHEDULE_SHAPES[self.shape](self.start, self.end, (stage + 0.5) / self.stage_count)


# above this many epochs of a source the plan warns: per phase (unless the phase sets max_epochs)
# and over the whole stage (the `epochs` check's default)
DEFAULT_EPOCH_WARNING = 4.0


@dataclass(frozen=True)
class Phase:
    name: str
    tokens: int
    seq_length: int
    temperature: float | Schedule
    min_doc_tokens: int = 0  # only documents at least this long (needs fresh documents)
    max_epochs: float | None = None  # per source, in this phase; None: no limit

    def stages(self, batch_tokens: int = 1) -> list[Stage]:
        """The blends that make up the phase: one at a constant temperature, else one per share
        of a schedule. Shares are equal up to one global batch (`batch_tokens`), so that every
        stage switches at a whole iteration; the last one also takes what does not fill a batch."""
        if not isinstance(self.temperature, Schedule):
            return [Stage(self.name, self.tokens, self.temperature)]
        count = self.temperature.stage_count
        batches = self.tokens // batch_tokens
        bounds = [batches * k // count * batch_tokens for k in range(count)] + [self.tokens]
        return [
            Stage(self.name if count == 1 else f"{self.name}-{k + 1}", bounds[k + 1] - bounds[k],
                  self.temperature.at(k))
            for k in range(count)
        ]


@dataclass(frozen=True)
class MegatronSettings:
    """What the training run will say: the flags that decide its sample counts and cache names."""

    seed: int
    split: str
    global_batch_size: int
    eval_interval: int
    eval_iters: int
    data_root: str | None  # where training sees the output folder; None: the same path
    tokenizer_identity: dict  # the training tokenizer's unique_identifiers
    tokenizer_args: tuple[str, ...]  # the flags that give that tokenizer, when known


@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    tokenizer: str  # which tokenized/<tokenizer>/ tree to read
    sources: tuple[Source, ...]
    phases: tuple[Phase, ...]
    megatron: MegatronSettings
    fresh_documents: bool = False  # each stage reads its own subset of every prefix (a view)
    export: tuple[str, ...] = ()  # extra outputs: "packed"
    sha256: str = ""  # of the file's bytes as read: part of the plan's identity

    def phase_stages(self) -> list[tuple[Phase, Stage]]:
        """Every stage of the recipe, in training order, with its phase."""
        gbs = self.megatron.global_batch_size
        return [(phase, stage) for phase in self.phases for stage in phase.stages(gbs * phase.seq_length)]


def load_recipe(path: Path) -> Recipe:
    """Read, parse and check `path`; the recipe's name is the file's stem."""
    return parse_recipe(Path(path), read_recipe_bytes(Path(path)))


def parse_recipe(path: Path, data: bytes) -> Recipe:
    """Parse and check `data`, the bytes of recipe file `path` (read_recipe_bytes)."""
    _checked_name(path, "(file name)", path.stem)
    try:
        _refuse_unbounded_yaml(path, data)
        document = yaml.load(data, Loader=_RecipeLoader)  # a SafeLoader
    except yaml.YAMLError as error:
        raise RecipeError(path, "(file)", f"cannot be read as YAML: {error}") from error
    fields = _Fields(path, document, "(top level)")
    fields.only({"tokenizer", "sources", "phases", "megatron", "fresh_documents", "export"})
    recipe = Recipe(
        name=path.stem,
        path=path,
        tokenizer=_checked_name(path, "tokenizer", fields.text("tokenizer")),
        sources=_sources(path, fields.mapping("sources")),
        phases=_phases(path, fields.sequence("phases")),
        megatron=_megatron(_Fields(path, fields.mapping("megatron"), "megatron")),
        fresh_documents=fields.flag("fresh_documents"),
        export=_export(fields),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    _check_stages(recipe)
    names = [stage.name for _, stage in recipe.phase_stages()]
    if len(set(names)) != len(names):
        raise RecipeError(path, "phases", f"stage names repeat: {names}")
    return recipe


def read_recipe_bytes(path: Path) -> bytes:
    """The bytes of recipe file `path`, at most MAX_RECIPE_BYTES of them; a file that is larger, not
    a regular file (a FIFO would block the reader for good) or unreadable is a RecipeError."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            facts = os.fstat(descriptor)
            if not stat.S_ISREG(facts.st_mode):
                raise RecipeError(path, "(file)", "is not a regular file")
            with open(descriptor, "rb", closefd=False) as file:
                data = file.read(MAX_RECIPE_BYTES + 1)
        finally:
            os.close(descriptor)
    except OSError as error:
        raise RecipeError(path, "(file)", f"cannot be read: {error}") from error
    if len(data) > MAX_RECIPE_BYTES:
        raise RecipeError(path, "(file)", f"holds {max(facts.st_size, len(data)):,} bytes, over the limit of "
                          f"{MAX_RECIPE_BYTES:,}: a recipe is a few kilobytes")
    return data


def _refuse_unbounded_yaml(path: Path, data: bytes) -> None:
    """Refuse from the parser's events, before any value is built: anchors and aliases (a recipe of
    a few lines must not grow into billions of values, a "billion laughs"), and nesting deeper than
    MAX_RECIPE_DEPTH (stopped at the first level too deep, whatever follows)."""
    depth = 0
    for event in yaml.parse(data, Loader=_RecipeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise RecipeError(path, "(file)", f"uses a YAML anchor or alias (&{event.anchor} / *{event.anchor}) "
                              f"at line {event.start_mark.line + 1}: write the values out, recipes may not "
                              "repeat parts of themselves")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_RECIPE_DEPTH:
                raise RecipeError(path, "(file)", f"nests mappings and lists more than {MAX_RECIPE_DEPTH} levels "
                                  f"deep (line {event.start_mark.line + 1}): the recipe format is five levels deep")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_stages(recipe: Recipe) -> None:
    """Every stage of a schedule gets at least one global batch; views need a train split."""
    batch = recipe.megatron.global_batch_size
    for i, phase in enumerate(recipe.phases):
        scheduled = isinstance(phase.temperature, Schedule)
        if scheduled and phase.tokens < phase.temperature.stage_count * batch * phase.seq_length:
            raise RecipeError(recipe.path, f"phases[{i}].temperature.stages",
                              f"{phase.temperature.stage_count} stages of at least one global batch ({batch} samples "
                              f"of {phase.seq_length} tokens) need more than the phase's {phase.tokens} tokens")
        if phase.min_doc_tokens and not recipe.fresh_documents:
            raise RecipeError(recipe.path, f"phases[{i}].min_doc_tokens",
                              "filters the stages' views: needs `fresh_documents: true`")
    if recipe.fresh_documents and not parse_split(recipe.megatron.split)[0] > 0:
        raise RecipeError(recipe.path, "megatron.split", "fresh documents size views for the train split: it is empty")


def _sources(path: Path, sources: dict) -> tuple[Source, ...]:
    if not sources:
        raise RecipeError(path, "sources", "no source")
    parsed = []
    for name, spec in sources.items():
        key = f"sources.{name}"
        _checked_name(path, key, str(name))
        fields = _Fields(path, spec, key)
        fields.only({"buckets", "dumps", "weight", "reweight"})
        buckets = tuple(str(b) for b in fields.sequence("buckets"))
        known = [bucket.name for bucket in SEED_POLICY.buckets]
        for i, bucket in enumerate(buckets):
            if bucket not in known:
                raise RecipeError(path, f"{key}.buckets[{i}]", f"unknown bucket {bucket!r} (known: {known})")
        dumps = fields.sequence("dumps", required=False)
        weight = fields.number("weight", required=False)
        if weight is not None and weight < 0:
            raise RecipeError(path, f"{key}.weight", f"negative weight {weight}")
        reweight = _reweight(path, key, buckets, fields) if "reweight" in fields.values else None
        parsed.append(Source(str(name), buckets, None if dumps is None else tuple(map(str, dumps)), weight, reweight))
    given = [source.weight for source in parsed if source.weight is not None]
    if len(given) == len(parsed) and not any(given):
        raise RecipeError(path, "sources", "every weight is zero")
    return tuple(parsed)


def _reweight(path: Path, key: str, buckets: tuple[str, ...], source: "_Fields") -> Reweight:
    """`{by: probe_loss, max_multiplier: M, drop_top_share: S, probe: name, buckets: [...]}`."""
    key = f"{key}.reweight"
    fields = _Fields(path, source.mapping("reweight"), key)
    fields.only({"by", "max_multiplier", "drop_top_share", "probe", "buckets"})
    by = fields.text("by")
    if by not in REWEIGHT_BY:
        raise RecipeError(path, f"{key}.by", f"{by!r}: documents can be reweighted by {list(REWEIGHT_BY)}")
    multiplier, share = fields.number("max_multiplier"), fields.number("drop_top_share")
    if not multiplier >= 1:
        raise RecipeError(path, f"{key}.max_multiplier", f"{multiplier} is below 1: a document is never weighed "
                          "below its plain share, so the cap must be at least 1")
    if multiplier > MAX_MULTIPLIER:
        raise RecipeError(path, f"{key}.max_multiplier", f"{multiplier:g} is above {MAX_MULTIPLIER:g}: repeated data "
                          f"is worth little more after about {MAX_MULTIPLIER:g} passes (Muennighoff et al. 2023), so "
                          f"the cap is at most {MAX_MULTIPLIER:g}")
    if not 0 <= share < 0.5:
        raise RecipeError(path, f"{key}.drop_top_share", f"{share} is outside [0, 0.5): the share of the "
                          "source's documents with the highest losses to drop")
    probe = _checked_name(path, f"{key}.probe", fields.text("probe")) if "probe" in fields.values else DEFAULT_PROBE
    chosen = tuple(str(b) for b in fields.sequence("buckets", required=False) or buckets)
    for i, bucket in enumerate(chosen):
        if bucket not in buckets:
            raise RecipeError(path, f"{key}.buckets[{i}]",
                              f"bucket {bucket!r} is not one of the source's {list(buckets)}")
    return Reweight(multiplier, share, probe, chosen)


def _phases(path: Path, phases: list) -> tuple[Phase, ...]:
    if not phases:
        raise RecipeError(path, "phases", "no phase")
    parsed = []
    for i, spec in enumerate(phases):
        fields = _Fields(path, spec, f"phases[{i}]")
        fields.only({"name", "tokens", "seq_length", "temperature", "min_doc_tokens", "max_epochs"})
        max_epochs = fields.number("max_epochs", required=False)
        if max_epochs is not None and not max_epochs > 0:
            raise RecipeError(path, f"phases[{i}].max_epochs", "must be positive")
        seq_length = fields.positive_int("seq_length")
        if seq_length > MAX_SEQ_LENGTH:
            raise RecipeError(path, f"phases[{i}].seq_length", f"{seq_length} tokens: Megatron's int32 sample "
                              f"index addresses samples of at most {MAX_SEQ_LENGTH} tokens")
        phase = Phase(
            name=_checked_name(path, f"phases[{i}].name", fields.text("name")),
            tokens=fields.positive_int("tokens"),
            seq_length=seq_length,
            temperature=_temperature(fields),
            min_doc_tokens=fields.positive_int("min_doc_tokens") if "min_doc_tokens" in fields.values else 0,
            max_epochs=max_epochs,
        )
        if phase.tokens < phase.seq_length:
            raise RecipeError(path, f"phases[{i}].tokens", "fewer tokens than one sample")
        parsed.append(phase)
    return tuple(parsed)


def _temperature(fields: "_Fields") -> float | Schedule:
    """A positive number, or `{from, to, shape, stages}` (shape: a key of SCHEDULE_SHAPES)."""
    key = fields._name("temperature")
    if not isinstance(fields.values.get("temperature"), dict):
        value = fields.number("temperature", required=False, default=1.0)
        if not value > 0:
            raise RecipeError(fields.path, key, "must be positive")
        return value
    schedule = _Fields(fields.path, fields.mapping("temperature"), key)
    schedule.only({"from", "to", "shape", "stages"})
    start, end = schedule.number("from"), schedule.number("to")
    if not (start > 0 and end > 0):
        raise RecipeError(fields.path, key, f"from and to must be positive, got {start} and {end}")
    shape = schedule.text("shape")
    if shape not in SCHEDULE_SHAPES:
        raise RecipeError(fields.path, f"{key}.shape", f"{shape!r} is not one of {list(SCHEDULE_SHAPES)}")
    count = schedule.positive_int("stages")
    if count > MAX_SCHEDULE_STAGES:
        raise RecipeError(fields.path, f"{key}.stages", f"{count:,} stages: a schedule has at most "
                          f"{MAX_SCHEDULE_STAGES:,} (each is a blend with its own Megatron flags and caches)")
    return Schedule(start, end, shape, count)


def _export(fields: "_Fields") -> tuple[str, ...]:
    """`export: packed` (or a list of exports)."""
    value = fields.values.get("export")
    exports = [] if value is None else [value] if isinstance(value, str) else value
    if not isinstance(exports, list) or any(e not in EXPORTS for e in exports):
        raise RecipeError(fields.path, "export", f"{value!r}: known exports are {list(EXPORTS)}")
    return tuple(exports)


def _megatron(fields: "_Fields") -> MegatronSettings:
    fields.only({"seed", "split", "global_batch_size", "eval_interval", "eval_iters", "data_root", "tokenizer"})
    identity, tokenizer_args = _tokenizer_identity(
        _Fields(fields.path, fields.mapping("tokenizer"), "megatron.tokenizer")
    )
    split = fields.text("split")
    try:
        parse_split(split)
    except ValueError as error:
        raise RecipeError(fields.path, "megatron.split", str(error)) from error
    data_root = fields.values.get("data_root")
    return MegatronSettings(
        seed=fields.positive_int("seed", allow_zero=True) if "seed" in fields.values else DEFAULT_SEED,
        split=split,
        global_batch_size=fields.positive_int("global_batch_size"),
        eval_interval=fields.positive_int("eval_interval"),
        eval_iters=fields.positive_int("eval_iters", allow_zero=True),
        data_root=None if data_root is None else str(data_root),
        tokenizer_identity=identity,
        tokenizer_args=tokenizer_args,
    )


def _tokenizer_identity(fields: "_Fields") -> tuple[dict, tuple[str, ...]]:
    """`{type: NullTokenizer, vocab_size: N}`, or `{identity: {...}}` given verbatim."""
    fields.only({"type", "vocab_size", "identity"})
    if "identity" in fields.values:
        identity = fields.mapping("identity")
        if "class" not in identity:
            raise RecipeError(fields.path, "megatron.tokenizer.identity", "has no 'class'")
        return dict(identity), ()
    kind = fields.text("type")
    if kind != "NullTokenizer":
        raise RecipeError(
            fields.path, "megatron.tokenizer.type",
            f"{kind!r}: give `identity:` (its unique_identifiers, see docs/mixtures.md) "
            "for tokenizers other than NullTokenizer",
        )
    vocab_size = fields.positive_int("vocab_size")
    identity = {"class": NULL_TOKENIZER_CLASS, "tokenizer_path": None, "vocab_size": str(vocab_size)}
    return identity, ("--tokenizer-type", "NullTokenizer", "--vocab-size", str(vocab_size))


class _Fields:
    """Typed access to one YAML mapping, every error naming `<key>.<field>`."""

    def __init__(self, path: Path, values, key: str) -> None:
        if not isinstance(values, dict):
            raise RecipeError(path, key, f"must be a mapping, got {type(values).__name__}")
        self.path, self.values, self.key = path, values, key

    def _name(self, field: str) -> str:
        return field if self.key == "(top level)" else f"{self.key}.{field}"

    def only(self, allowed: set[str]) -> None:
        unknown = sorted(set(map(str, self.values)) - allowed)
        if unknown:
            raise RecipeError(self.path, self._name(unknown[0]), f"unknown key (allowed: {sorted(allowed)})")

    def _get(self, field: str, required: bool, default=None):
        if field not in self.values or self.values[field] is None:
            if required:
                raise RecipeError(self.path, self._name(field), "is missing")
            return default
        return self.values[field]

    def text(self, field: str) -> str:
        value = self._get(field, True)
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise RecipeError(self.path, self._name(field), f"must be text, got {value!r}")
        return str(value)

    def number(self, field: str, required: bool = True, default=None) -> float | None:
        value = self._get(field, required, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise RecipeError(self.path, self._name(field), f"must be a finite number, got {value!r}")
        return value

    def flag(self, field: str) -> bool:
        value = self._get(field, False, False)
        if not isinstance(value, bool):
            raise RecipeError(self.path, self._name(field), f"must be true or false, got {value!r}")
        return value

    def positive_int(self, field: str, allow_zero: bool = False) -> int:
        """A whole number however written: `2048`, `2_048`, `2048.0`, `1e12`, `1.5e6` (a float, exact
        up to 2**53: beyond, the digits written may not be the number read)."""
        value = self._get(field, True)
        if isinstance(value, float) and value.is_integer():
            if abs(value) > 2**53:
                raise RecipeError(self.path, self._name(field), f"{value:g} is a float beyond 2**53, where it stops "
                                  "being exact: write it in digits")
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
            kind = "a non-negative" if allow_zero else "a positive"
            raise RecipeError(self.path, self._name(field), f"must be {kind} integer, got {value!r}")
        return value

    def mapping(self, field: str) -> dict:
        value = self._get(field, True)
        if not isinstance(value, dict):
            raise RecipeError(self.path, self._name(field), f"must be a mapping, got {value!r}")
        return value

    def sequence(self, field: str, required: bool = True) -> list | None:
        value = self._get(field, required)
        if value is None:
            return None
        if not isinstance(value, list) or not value:
            raise RecipeError(self.path, self._name(field), f"must be a non-empty list, got {value!r}")
        return value
