"""Named row rules, shared by the pandera schemas and the SQL that counts failing rows.

A rule's name is the name of its pandera check and the name of the column counting its failures
in each `sql/*.sql` statement that counts it, so both enforcements of a contract report the same
rule. A rule counted by no statement is checked by pandera on sampled rows only.
fw_assets_tests/bucketing/test_contract_schemas.py fails when a rule lacks either half, and checks that both
halves flag the same rows.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    name: str
    column: str
    problem: str  # completes "N rows …" ("with a null score"); may hold {dump}
    counted_by: tuple[str, ...]  # sql/*.sql statements with a column of its name; (): sampled rows

    def states(self, dump: str) -> str:
        return self.problem.format(dump=dump)


# The closed range a finite score must lie in (the raw contract).
SCORE_MIN, SCORE_MAX = 0.0, 6.0

_RAW_ROWS = "contract_raw_rows"
_BUCKETED_ROWS = "contract_bucketed_rows"
_SELECTION = "contract_selection"

ID_NULL = Rule("id_null", "id", "with a null id", (_RAW_ROWS, _BUCKETED_ROWS))
ID_DUPLICATE = Rule(
    "id_duplicate", "id", "whose id occurs more than once in the dump", ("contract_duplicate_ids",)
)
SCORE_NULL = Rule("score_null", "score", "with a null score", (_RAW_ROWS, _BUCKETED_ROWS))
SCORE_NOT_FINITE = Rule("score_not_finite", "score", "with a NaN or ±inf score", (_RAW_ROWS,))
SCORE_OUT_OF_RANGE = Rule("score_out_of_range", "score", "with a score outside 0–6", (_RAW_ROWS,))
DUMP_MISMATCH = Rule("dump_mismatch", "dump", "with a dump other than {dump}", (_RAW_ROWS,))
FILE_PATH_MISMATCH = Rule(
    "file_path_mismatch", "file_path", "with a file_path not under crawl-data/{dump}/", (_RAW_ROWS,)
)
TEXT_NULL = Rule("text_null", "text", "with a null text", ("contract_text_nulls",))
INT_SCORE_MISMATCH = Rule(
    "int_score_mismatch",
    "int_score",
    "with an int_score other than int(round(clamp(score, 0, 5)))",
    (_RAW_ROWS,),
)
TEXT_BLANK = Rule("text_blank", "text", "with an empty or whitespace-only text", ())

# Counted for every row by sql/contract_raw_rows.sql, in its column order.
RAW_ROW_RULES = (
    ID_NULL,
    SCORE_NULL,
    SCORE_NOT_FINITE,
    SCORE_OUT_OF_RANGE,
    DUMP_MISMATCH,
    FILE_PATH_MISMATCH,
    INT_SCORE_MISMATCH,
)

BUCKET_MISMATCH = Rule(
    "bucket_mismatch", "bucket", "whose score belongs in another bucket", (_SELECTION,)
)
KEEP_NULL = Rule("keep_null", "keep", "with no keep decision", (_SELECTION,))
KEPT_BELOW_BUCKETS = Rule(
    "kept_below_buckets", "keep", "kept although their score is below every bucket", (_SELECTION,)
)
SCORE_OUTSIDE_BUCKET = Rule(
    "score_outside_bucket", "score", "with a score outside their bucket's interval", (_BUCKETED_ROWS,)
)
