"""The reviewed noun → COCO category lexicon: data checks, the build script, the loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from capaudit.errors import InputError
from capaudit.lexicons import LEXICON_DIR, coco_lexicon, load_noun_lexicon
from capaudit.lexicons import build_coco_lexicon as B


@pytest.fixture(scope="module")
def lex():
    return coco_lexicon()


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load((LEXICON_DIR / "coco_categories.yaml").read_text(encoding="utf-8"))


def test_brief_examples(lex) -> None:
    cases = {
        "puppy": "dog", "puppies": "dog", "man": "person", "women": "person", "child": "person", "children": "person",
        "boy": "person", "girl": "person", "sofa": "couch", "tv": "tv", "television": "tv", "motorbike": "motorcycle",
        "kitten": "cat", "oxen": "cow", "lamb": "sheep", "fridge": "refrigerator", "cellphone": "cell phone",
        "doughnut": "donut", "hair dryer": "hair drier", "racquet": "tennis racket", "skier": "person",
    }
    assert {w: lex.category_of(w) for w in cases} == cases


def test_heads_and_longest_terms(lex) -> None:
    # the head of a phrase decides; a longer term wins over its last word
    assert lex.category_of("two brown dogs") == "dog"
    assert lex.category_of("a red double decker bus") == "bus"
    assert lex.category_of("a teddy bear") == "teddy bear" and lex.category_of("polar bear") == "bear"
    assert lex.category_of("dirt bike") == "motorcycle" and lex.category_of("bike") == "bicycle"
    assert lex.category_of("stuffed bear") == "teddy bear"
    assert lex.category_of("wooden fence") is None and lex.category_of("") is None
    assert lex.mentions("A man riding a motorbike next to two puppies") == [
        ("man", "person"), ("motorbike", "motorcycle"), ("puppy", "dog")]


def test_wordnet_hyponyms_and_reviewed_drops(lex) -> None:
    # WordNet hyponyms that passed the rules
    assert lex.category_of("beagle") == "dog" and lex.category_of("golden retriever") == "dog"
    assert lex.category_of("sparrow") == "bird" and lex.category_of("limousine") == "car"
    assert lex.category_of("rocking chair") == "chair" and lex.category_of("canoe") == "boat"
    # ambiguous hyponyms are dropped: the first sense is something else, or reviewed out
    for word in ("chicken", "charger", "glove", "cookie", "pancake", "whale", "maker", "lounge", "electric", "entire"):
        assert lex.category_of(word) is None, word
    assert lex.category_of("coffee maker") is None  # 'maker' is not a person here
    # a nested root keeps the more specific category (a microwave is an oven in WordNet)
    assert lex.category_of("microwave oven") == "microwave"


def test_categories_match_coco_mini(lex, raw) -> None:
    from capaudit.data.coco import coco_mini

    names = coco_mini().category_names
    assert {c["id"]: c["name"] for c in raw["categories"]} == names
    for name in names.values():
        assert lex.category_of(name) == name, name
    assert lex.supercategory("dog") == "animal" and lex.supercategory("tv") == "electronic"
    assert "puppy" in lex.terms_of("dog") and "sofa" in lex.terms_of("couch")
    with pytest.raises(KeyError, match="no category 'unicorn'"):
        lex.terms_of("unicorn")


def test_no_term_in_two_categories(raw) -> None:
    owner = {}
    for c in raw["categories"]:
        for t in c["terms"] + c.get("hyponyms", []):
            key = " ".join(t.lower().split())
            assert owner.setdefault(key, c["name"]) == c["name"], (t, owner[key], c["name"])
    assert len(owner) > 3000


def test_drop_report_names_reason_and_category(raw) -> None:
    rows = (LEXICON_DIR / "coco_categories_dropped.tsv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "term\tcategory\treason"
    names = {c["name"] for c in raw["categories"]}
    for line in rows[1:]:
        term, cat, reason = line.split("\t")
        assert term and cat in names and reason
    assert any(line.startswith("chicken\tbird\tambiguous") for line in rows)


@pytest.mark.slow
def test_build_script_output_is_committed() -> None:
    """The YAML and the drop report equal a fresh build from WordNet and the reviewed tables."""
    assert B.main(["--check"]) == 0


def test_build_tables_are_consistent() -> None:
    names = [n for _, n, _ in B.CATEGORIES]
    assert len(names) == 80 and set(B.CURATED) <= set(names) and set(B.ROOTS) <= set(names)
    for cat, terms in B.CURATED.items():
        assert cat in terms, cat  # the category name is always a term


def test_loader_errors_name_file_and_field(tmp_path: Path) -> None:
    p = tmp_path / "lex.yaml"
    p.write_text("categories:\n  - {name: dog, terms: [dog, puppy]}\n  - {name: cat, terms: [cat, puppy]}\n")
    with pytest.raises(InputError, match=r"lex\.yaml field 'terms': term 'puppy' maps to both 'dog' and 'cat'"):
        load_noun_lexicon(p)
    p.write_text("categories:\n  - {name: dog}\n")
    with pytest.raises(InputError, match="entry 0 needs 'name' and a 'terms' list"):
        load_noun_lexicon(p)
    p.write_text("categories:\n  - {name: dog, terms: [dog], hyponyms: puppy}\n")
    with pytest.raises(InputError, match="'hyponyms' must be a list"):
        load_noun_lexicon(p)
    p.write_text("- just a list\n")
    with pytest.raises(InputError, match="must be a mapping"):
        load_noun_lexicon(p)
    p.write_text("categories:\n  - {name: dog, terms: [dog], hyponyms: [beagle]}\n")
    lex = load_noun_lexicon(p)
    assert lex.category_of("beagles") == "dog"
