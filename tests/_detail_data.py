"""COCO instances shared by the detailness tests (test_detail_metrics, test_detail_cli)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

W, H = 20, 10  # image area 200


def rect(x0: int, y0: int, x1: int, y1: int) -> List[List[int]]:
    """Polygon of pixels x0..x1-1, y0..y1-1 (pycocotools rasterisation of integer rectangles)."""
    return [[x0, y0, x1, y0, x1, y1, x0, y1]]


def two_image_instances(cat_segmentation: Any) -> Dict[str, Any]:
    """COCO instances of a W x H image ``a.jpg`` (the cat: ``cat_segmentation``, x 12..19, y 6..9)
    and an image ``empty.jpg`` without annotations."""
    return {
        "images": [{"id": 1, "file_name": "a.jpg", "width": W, "height": H},
                   {"id": 2, "file_name": "empty.jpg", "width": W, "height": H}],
        "categories": [{"id": 1, "name": "person"}, {"id": 17, "name": "cat"}, {"id": 18, "name": "dog"}],
        "annotations": [
            # two dogs: 100 px + 40 px, overlapping in 20 px -> union 120
            {"id": 1, "image_id": 1, "category_id": 18, "iscrowd": 0, "segmentation": rect(0, 0, 10, 10)},
            {"id": 2, "image_id": 1, "category_id": 18, "iscrowd": 0, "segmentation": rect(5, 0, 15, 4)},
            # a person crowd region (uncompressed RLE, column-major): x 16..19, y 0..4 -> 20 px
            {"id": 3, "image_id": 1, "category_id": 1, "iscrowd": 1,
             "segmentation": {"size": [H, W], "counts": [160, 5, 5, 5, 5, 5, 5, 5, 5]}},
            # one person polygon x 8..11, y 5..9 -> 20 px, 10 of them on the first dog
            {"id": 4, "image_id": 1, "category_id": 1, "iscrowd": 0, "segmentation": rect(8, 5, 12, 10)},
            # a cat: 32 px, no overlap
            {"id": 5, "image_id": 1, "category_id": 17, "iscrowd": 0, "segmentation": cat_segmentation},
        ],
    }


# -- a format-exact COCO panoptic set (panopticapi layout: JSON + PNG folder beside it) ----------------
#: the classes used (ids and names as in panopticapi's panoptic_coco_categories.json)
PANOPTIC_CATEGORIES = [
    {"id": 1, "name": "person", "supercategory": "person", "isthing": 1},
    {"id": 18, "name": "dog", "supercategory": "animal", "isthing": 1},
    {"id": 171, "name": "wall-brick", "supercategory": "wall", "isthing": 0},
    {"id": 187, "name": "sky-other-merged", "supercategory": "sky", "isthing": 0},
    {"id": 193, "name": "grass-merged", "supercategory": "plant", "isthing": 0},
    {"id": 199, "name": "wall-other-merged", "supercategory": "wall", "isthing": 0},
]
#: segment id -> (category id, iscrowd, (x0, y0, x1, y1)) of image a.jpg (W x H = 20 x 10):
#: sky rows 0-2 (60 px), void row 8 (20 px), grass row 9 (20 px); rows 3-7: dog x 0-4, person
#: crowd x 5-9, plain wall x 10-14, brick wall x 15-19 (25 px each). Ids above 255 and 65535 test
#: the G and B channels (id = R + 256 G + 256^2 B).
PANOPTIC_SEGMENTS = {300: (187, 0, (0, 0, 20, 3)), 70000: (18, 0, (0, 3, 5, 8)), 5: (1, 1, (5, 3, 10, 8)),
                     6: (199, 0, (10, 3, 15, 8)), 7: (171, 0, (15, 3, 20, 8)), 8: (193, 0, (0, 9, 20, 10))}


def panoptic_png(segments: Dict[int, Any], width: int = W, height: int = H) -> Any:
    """RGB array of a panoptic PNG: each segment's box painted with its id, the rest 0 (void)."""
    import numpy as np

    ids = np.zeros((height, width), dtype=np.uint32)
    for sid, (_, _, (x0, y0, x1, y1)) in segments.items():
        ids[y0:y1, x0:x1] = sid
    return np.stack([ids % 256, (ids // 256) % 256, ids // 65536], axis=-1).astype(np.uint8)


def write_panoptic(root: Any, name: str = "panoptic_val2017", segments: Optional[Dict[int, Any]] = None,
                   extra_segments_info: Sequence[Dict[str, Any]] = (), png_size: Tuple[int, int] = (W, H),
                   write_png: bool = True) -> Any:
    """Write ``root/<name>.json`` and ``root/<name>/a.png`` (image a.jpg annotated; b.jpg listed
    without an annotation); returns the JSON path."""
    import json
    from pathlib import Path

    from PIL import Image

    segments = PANOPTIC_SEGMENTS if segments is None else segments
    root = Path(root)
    (root / name).mkdir(parents=True, exist_ok=True)
    if write_png:
        Image.fromarray(panoptic_png(segments, *png_size), mode="RGB").save(root / name / "a.png")
    info = [{"id": sid, "category_id": cid, "iscrowd": crowd, "area": (x1 - x0) * (y1 - y0),
             "bbox": [x0, y0, x1 - x0, y1 - y0]} for sid, (cid, crowd, (x0, y0, x1, y1)) in segments.items()]
    data = {"images": [{"id": 1, "file_name": "a.jpg", "width": W, "height": H},
                       {"id": 2, "file_name": "b.jpg", "width": W, "height": H}],
            "annotations": [{"image_id": 1, "file_name": "a.png", "segments_info": info + list(extra_segments_info)}],
            "categories": PANOPTIC_CATEGORIES}
    path = root / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
