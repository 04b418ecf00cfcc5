"""The data contracts as pandera schemas (pandera's pandas backend, arrow-typed columns).

At run time these schemas validate what fits in memory: every file's footer schema (column
presence and types, as an empty frame) and a sample of raw rows for the deeper text checks.
The row rules over every row of a dump run as DuckDB aggregates (`sql/contract_*.sql`) under the
same rule names; the schemas state the same rules for any frame, and the tests hold the two to
agreement.
"""

import math
import re

import numpy as np
import pandas as pd
import pandera.pandas as pa
import pyarrow

from fw_assets.bucketing import contract_rules as rules
from fw_assets.bucketing.contract_rules import SCORE_MAX, SCORE_MIN
from fw_assets.sampling_policy import SamplingPolicy, ScoreBucket

STRING = pd.ArrowDtype(pyarrow.string())
DOUBLE = pd.ArrowDtype(pyarrow.float64())
INT64 = pd.ArrowDtype(pyarrow.int64())
BOOL = pd.ArrowDtype(pyarrow.bool_())

def _check(rule: rules.Rule, fn, *, dump: str = "", **options) -> pa.Check:
    """A pandera check named after its rule, so its failure cases map back to the rule."""
    return pa.Check(fn, name=rule.name, description=rule.states(dump), **options)


def _finite(scores: pd.Series) -> pd.Series:
    return scores.isna() | (scores.abs() < math.inf)


def _in_score_range(scores: pd.Series) -> pd.Series:
    """Inside 0–6, or null or not finite (those are other rules' failures)."""
    return ~_finite(scores) | scores.isna() | scores.between(SCORE_MIN, SCORE_MAX)


def _int_score_matches(frame: pd.DataFrame) -> pd.Series:
    """`int_score == int(round(clamp(score, 0, 5)))`; `np.rint` rounds half to even like `round`."""
    scores = frame["score"].to_numpy(dtype=float, na_value=np.nan)
    expected = np.rint(np.clip(scores, 0.0, 5.0))
    unknown = ~np.isfinite(scores)  # such rows fail the score rules already
    actual = frame["int_score"].to_numpy(dtype=float, na_value=np.nan)
    return pd.Series(unknown | (actual == expected), index=frame.index)


def raw_schema(dump: str) -> pa.DataFrameSchema:
    """A FineWeb-Edu source file of `dump`: the ten columns and their rules; extra columns pass."""
    return pa.DataFrameSchema(
        {
            "text": pa.Column(STRING, nullable=False),
            "id": pa.Column(STRING, nullable=False, unique=True),
            # a null dump or file_path names no dump: it fails the rule, as in the SQL
            "dump": pa.Column(
                STRING,
                _check(rules.DUMP_MISMATCH, lambda s: s.fillna("") == dump, dump=dump, ignore_na=False),
                nullable=True,
            ),
            "url": pa.Column(STRING, nullable=True),
            "file_path": pa.Column(
                STRING,
                _check(
                    rules.FILE_PATH_MISMATCH,
                    lambda s: s.fillna("").str.contains(re.escape(f"crawl-data/{dump}/")),
                    dump=dump,
                    ignore_na=False,
                ),
                nullable=True,
            ),
            "language": pa.Column(STRING, nullable=True),
            "language_score": pa.Column(DOUBLE, nullable=True),
            "token_count": pa.Column(INT64, nullable=True),
            "score": pa.Column(
                DOUBLE,
                [
                    _check(rules.SCORE_NOT_FINITE, _finite),
                    _check(rules.SCORE_OUT_OF_RANGE, _in_score_range),
                ],
                nullable=False,
            ),
            "int_score": pa.Column(INT64, nullable=True),
        },
        checks=[_check(rules.INT_SCORE_MISMATCH, _int_score_matches, raise_warning=True)],
        strict=False,
        name=f"raw {dump}",
    )


RAW_TEXT_SAMPLE_SCHEMA = pa.DataFrameSchema(
    {
        "id": pa.Column(STRING, nullable=True),
        # null texts are the key_columns check's, over every row
        "text": pa.Column(
            STRING, _check(rules.TEXT_BLANK, lambda s: s.str.strip() != ""), nullable=True
        ),
    },
    name="raw text sample",
)
"""Deeper text checks, run on sampled rows of every file (a warning when they fail)."""


def selection_schema(policy: SamplingPolicy) -> pa.DataFrameSchema:
    """The sampled step's decision per source row: exactly these six columns."""
    return pa.DataFrameSchema(
        {
            "source_file": pa.Column(STRING, nullable=False),
            "source_row": pa.Column(INT64, nullable=False),
            "id": pa.Column(STRING, nullable=False),
            "score": pa.Column(DOUBLE, nullable=False),
            "bucket": pa.Column(STRING, nullable=True),  # null: below every bucket
            "keep": pa.Column(BOOL, nullable=False),
        },
        checks=[
            _check(
                rules.BUCKET_MISMATCH,
                lambda f: _bucket_names(f["score"], policy) == f["bucket"].fillna(""),
            ),
            _check(
                rules.KEPT_BELOW_BUCKETS,
                lambda f: ~(f["keep"].fillna(False) & f["bucket"].isna()),
            ),
        ],
        strict=True,
        ordered=True,
        name="selection",
    )


def _bucket_names(scores: pd.Series, policy: SamplingPolicy) -> pd.Series:
    """The policy's bucket name for each score ('' below every bucket)."""
    names = [(b.name if (b := policy.bucket_for(s)) else "") for s in scores.astype(float)]
    return pd.Series(names, index=scores.index, dtype=STRING)


def bucketed_schema(bucket: ScoreBucket) -> pa.DataFrameSchema:
    """A published bucket file: exactly id, text, score, every score inside the bucket."""
    return pa.DataFrameSchema(
        {
            "id": pa.Column(STRING, nullable=False, unique=True),
            "text": pa.Column(STRING, nullable=False),
            "score": pa.Column(
                DOUBLE,
                _check(rules.SCORE_OUTSIDE_BUCKET, lambda s: (s >= bucket.low) & (s < bucket.high)),
                nullable=False,
            ),
        },
        strict=True,
        ordered=True,
        name=f"bucket {bucket.name}",
    )
