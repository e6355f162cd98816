"""The synthetic shapes data set: reproducible by seed, masks exactly where discs were drawn, and an npz
folder layout the client's FolderSource reads (the accuracy demo depends on all three)."""
import math

import numpy as np
import pytest

from deployment_toolkit.data.batches import FolderSource
from deployment_toolkit.data.shapes import ShapesConfig, draw_sample, make_split, write_npz_folder
from deployment_toolkit.models import get_model

# no noise, no gradient, a fixed background: every pixel is either background or a shape
CLEAN = ShapesConfig(background=(0.1, 0.1), gradient=0.0, noise=(0.0, 0.0))


def test_same_seed_same_data_other_seed_other_data():
    images, masks = make_split(6, seed=3)
    again_images, again_masks = make_split(6, seed=3)
    assert images.dtype == np.float32 and images.shape == (6, 1, 64, 64)
    assert masks.dtype == np.int64 and masks.shape == (6, 64, 64)
    np.testing.assert_array_equal(images, again_images)
    np.testing.assert_array_equal(masks, again_masks)
    other_images, _ = make_split(6, seed=4)
    assert not np.array_equal(images, other_images)


def test_sample_depends_on_seed_and_index_only():
    small_images, small_masks = make_split(3, seed=7)
    big_images, big_masks = make_split(9, seed=7)
    np.testing.assert_array_equal(small_images, big_images[:3])
    np.testing.assert_array_equal(small_masks, big_masks[:3])


@pytest.mark.parametrize("seed", range(12))
def test_mask_is_exactly_the_drawn_discs(seed):
    sample = draw_sample(np.random.default_rng(seed), CLEAN)
    drawn_by_image = sample.image > 0.1 + 1e-4  # contrast >= 0.3 inside any shape, 0 outside
    np.testing.assert_array_equal(drawn_by_image, sample.drawn)
    assert set(np.unique(sample.mask)) <= {0, 1}
    assert not np.any(sample.mask.astype(bool) & ~sample.drawn), "mask pixels outside any drawn shape"
    kinds = [s.kind for s in sample.shapes]
    assert kinds.count("circle") >= 1 and len(kinds) >= 2
    yy, xx = np.mgrid[0:64, 0:64]
    disc_pixels = 0
    for shape in sample.shapes:
        cy, cx = shape.center
        near = (yy - cy) ** 2 + (xx - cx) ** 2 <= (shape.radius + 0.5) ** 2
        centre = sample.mask[int(round(cy)), int(round(cx))]
        assert sample.drawn[int(round(cy)), int(round(cx))], f"{shape.kind} centre not drawn"
        if shape.kind == "circle":
            assert centre == 1
            area = int(sample.mask[near].sum())
            assert abs(area - math.pi * shape.radius**2) < 2 * math.pi * shape.radius + 4  # within a 1-px rim
            disc_pixels += area
        else:
            assert centre == 0 and not sample.mask[near].any(), f"{shape.kind} labelled as disc"
    assert disc_pixels == int(sample.mask.sum())  # nothing else is labelled


def test_shapes_never_overlap_and_stay_inside():
    for seed in range(30):
        shapes = draw_sample(np.random.default_rng(seed)).shapes
        for i, a in enumerate(shapes):
            assert a.radius + 1 <= a.center[0] <= 64 - a.radius - 2 and a.radius + 1 <= a.center[1] <= 64 - a.radius - 2
            for b in shapes[i + 1:]:
                assert math.dist(a.center, b.center) >= a.radius + b.radius + 2


def test_kind_does_not_show_in_intensity():
    """Discs and distractors share one contrast range: only their shape tells them apart."""
    images, masks = make_split(64, seed=0, config=ShapesConfig(noise=(0.0, 0.0), gradient=0.0))
    disc, other = [], []
    for img, mask in zip(images[:, 0], masks):
        bg = np.median(img)
        fg = img > bg + 0.2
        disc.extend(img[mask == 1] - bg)
        other.extend(img[fg & (mask == 0)] - bg)
    assert abs(np.mean(disc) - np.mean(other)) < 0.1


def test_config_rejects_impossible_sizes():
    with pytest.raises(ValueError, match="too small"):
        ShapesConfig(size=32)
    with pytest.raises(ValueError, match="at least one circle"):
        ShapesConfig(circles=(0, 1))
    with pytest.raises(ValueError, match="at least one sample"):
        make_split(0, seed=0)


def test_npz_folder_reads_back_through_folder_source(tmp_path):
    images, masks = make_split(10, seed=1)
    paths = write_npz_folder(tmp_path, images, masks, shard_size=4)
    assert [p.name for p in paths] == ["shapes_00000.npz", "shapes_00001.npz", "shapes_00002.npz"]
    with np.load(paths[0], allow_pickle=False) as npz:
        assert set(npz.files) == {"input__0", "labels", "ids"}
        assert npz["ids"].dtype == np.int64
    source = FolderSource(tmp_path, get_model("unet2d").signature("small"))
    batches = list(source.batches(3))
    ids = np.concatenate([b[0] for b in batches])
    np.testing.assert_array_equal(ids, np.arange(10))
    np.testing.assert_array_equal(np.concatenate([b[1]["input__0"] for b in batches]), images)
    np.testing.assert_array_equal(np.concatenate([b[2]["labels"] for b in batches]), masks)


def test_rewriting_a_folder_replaces_old_shards_and_refuses_foreign_files(tmp_path):
    images, masks = make_split(10, seed=1)
    write_npz_folder(tmp_path, images, masks, shard_size=4)
    write_npz_folder(tmp_path, images[:3], masks[:3], shard_size=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shapes_00000.npz"]
    np.save(tmp_path / "other.npy", np.zeros(3))
    with pytest.raises(FileExistsError, match="other.npy"):
        write_npz_folder(tmp_path, images, masks)
    with pytest.raises(ValueError, match="expected images"):
        write_npz_folder(tmp_path / "new", images[:, 0], masks)
