"""Texts the dedup tests share."""

BASE = "the students measured the growth of plants in the school garden every week for 12 months"
# BASE in other case, punctuation, numbers, accents and whitespace: the same words once normalised.
VARIANTS = [
    "The Students measured the growth of plants, in the school-garden every week for 7 months!",
    "THE STUDENTS MEASURED THE GROWTH OF PLANTS IN THE SCHOOL GARDEN EVERY WEEK FOR 3.5 MONTHS.",
    "the  stüdents\tmeasured the\n\ngrowth of plánts in the school garden every week for 12 months",
]
