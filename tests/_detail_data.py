"""COCO instances shared by the detailness tests (test_detail_metrics, test_detail_cli)."""

from __future__ import annotations

from typing import Any, Dict, List

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
