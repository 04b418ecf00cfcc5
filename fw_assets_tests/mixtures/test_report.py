"""report.py: the shares picture of a curriculum; the reweighting section's warnings."""

import copy
import re
from html import unescape

import numpy as np
import pyarrow as pa
import yaml
from markdown_it import MarkdownIt

from fw_assets.formats.doc_index import read_document_index
from fw_assets.mixtures.contract import member_figures, source_stages
from fw_assets.mixtures.plan import plan_mixture
from fw_assets.mixtures.recipe import load_recipe
from fw_assets.mixtures.report import freshness_markdown, plot_shares, prefix_table, reweighting_markdown, source_table
from fw_assets.mixtures.reweighted import highest_losses
from fw_assets.mixtures.views import view_lengths
from fw_assets.paths import shares_picture_path, token_prefix
from fw_assets_tests.support.curriculum import CURRICULUM, DUMPS, plan


def test_picture(tmp_path, plenty):
    mixture = plan(tmp_path, plenty)
    png = plot_shares(mixture, shares_picture_path(tmp_path, "curriculum"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib import image

    pixels = image.imread(png)
    assert pixels.shape[1] == 900 and len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 5


def test_the_reweighting_section_warns_of_equal_losses_at_the_cut(tmp_path, plenty):
    """Every document of `top` has the same loss: the 5 % dropped are the lowest ids, which the
    report says rather than leaving it to be found."""
    recipe = copy.deepcopy(CURRICULUM)
    recipe["sources"]["top"]["reweight"] = {"by": "probe_loss", "max_multiplier": 2.0, "drop_top_share": 0.05}
    (tmp_path / "curriculum.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))

    def equal(probe: str, dump: str, bucket: str) -> list[pa.RecordBatch]:
        ids = read_document_index(token_prefix(plenty, "synthetic", "4.0", dump))["id"].combine_chunks()
        return pa.table({"id": ids, "loss": np.full(len(ids), 4.5)}).to_batches()

    mixture = plan_mixture(load_recipe(tmp_path / "curriculum.yaml"), plenty, DUMPS, equal)
    text = reweighting_markdown(mixture, source_stages(mixture), {}, {"top": "losses-top.png"})
    assert "**Warning:** 3,000 documents share the loss 4.5 at the cut of the top 5.0%: 150 of them were " \
           "dropped by the order of their ids, not by their loss" in text


def test_each_tokens_figure_is_named_for_what_it_counts(tmp_path, plenty):
    """A reweighted source has two different token counts per stage: its train split as the blend
    reads it (repetitions counted) and the distinct tokens it may read (each document once). Each
    table names its own; neither says just "tokens available"."""
    recipe = copy.deepcopy(CURRICULUM)
    recipe["sources"]["top"]["reweight"] = {"by": "probe_loss", "max_multiplier": 2.0, "drop_top_share": 0.05}
    (tmp_path / "curriculum.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    mixture = plan_mixture(load_recipe(tmp_path / "curriculum.yaml"), plenty, DUMPS, spread_losses(plenty))
    rows = source_stages(mixture)
    stage = mixture.stages[0]
    figures = member_figures(stage, view_lengths(mixture.views, stage.name))
    per_source, over_training = source_table(stage, figures), freshness_markdown(rows, [])
    assert "train-split tokens (repeats counted)" in per_source
    assert "distinct tokens it may read" in over_training
    for text in (per_source, over_training, prefix_table(figures)):
        assert "tokens available" not in text


def spread_losses(root):
    def read(probe: str, dump: str, bucket: str) -> list[pa.RecordBatch]:
        ids = read_document_index(token_prefix(root, "synthetic", "4.0", dump))["id"].combine_chunks()
        losses = np.random.default_rng(1).lognormal(np.log(5.0), 0.3, len(ids))
        return pa.table({"id": ids, "loss": losses}).to_batches()
    return read


TRICKY = "Cells ~divide~ and *grow*; see __init__ or [a link](x) <b>bold</b> | 2 * 3 _ok_ `code` &amp; # not a heading"


def test_the_highest_loss_texts_show_as_written_whatever_markdown_they_hold(tmp_path, plenty):
    """The UI renders report.md as Markdown: a `~`, `*` or `_` in a text must not strike through or
    italicize the rest of it. Rendered as the UI does (tables, strikethrough), each cell reads as written."""
    recipe = copy.deepcopy(CURRICULUM)
    recipe["sources"]["top"]["reweight"] = {"by": "probe_loss", "max_multiplier": 2.0, "drop_top_share": 0.05}
    (tmp_path / "curriculum.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    mixture = plan_mixture(load_recipe(tmp_path / "curriculum.yaml"), plenty, DUMPS, spread_losses(plenty))
    (weighting,) = mixture.reweighted
    starts = {doc_id: TRICKY for doc_id, *_ in highest_losses(weighting)}
    text = reweighting_markdown(mixture, source_stages(mixture), starts, {"top": "losses-top.png"})
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)
    cells = [unescape(c) for c in re.findall(r"<td>(.*?)</td>", html)]
    assert cells.count(TRICKY) == 10, [c for c in cells if "Cells" in c][:1]
