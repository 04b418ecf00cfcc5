"""report.py: the shares picture of a curriculum."""

import numpy as np

from fw_assets.paths import shares_picture_path
from fw_assets.mixtures.report import plot_shares
from fw_assets_tests.support.curriculum import plan


def test_picture(tmp_path, plenty):
    mixture = plan(tmp_path, plenty)
    png = plot_shares(mixture, shares_picture_path(tmp_path, "curriculum"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib import image

    pixels = image.imread(png)
    assert pixels.shape[1] == 900 and len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 5
