"""Caption clean-up (trailing ``TEXT: none`` blocks, §6) and PII masking of released captions."""

from __future__ import annotations

import pytest

from capaudit.recap.captions import clean_caption
from capaudit.recap.pii import mask_pii


@pytest.mark.parametrize("raw,clean", [
    ("A dog on grass.\n\nTEXT: none", "A dog on grass."),
    ("  A dog. TEXT: None.  ", "A dog."),
    ("A dog.\n**TEXT:** N/A", "A dog."),
    ("A dog.\nTEXT: (none visible)", "A dog."),
    ("A dog.\nTEXT: no visible text", "A dog."),
    ("A dog.\n\n- TEXT: none", "A dog."),
    ("A dog.\nTEXT: No text is visible in the image.", "A dog."),
    ("A dog.\nTEXT: none\nTEXT: n/a", "A dog."),           # repeated blocks
    ("A shop sign.\nTEXT:\nOPEN 24 HOURS", "A shop sign.\nTEXT:\nOPEN 24 HOURS"),  # real text is kept
    ("A sign.\nTEXT: NONE SHALL PASS", "A sign.\nTEXT: NONE SHALL PASS"),
    ("The text: none of it is legible", "The text: none of it is legible"),
    ("The sign's text: none", "The sign's text: none"),     # mid-sentence, not a block
    ("TEXT: none", ""),                                      # nothing left: the runner calls it a failure
])
def test_clean_caption(raw, clean):
    assert clean_caption(raw) == clean


@pytest.mark.parametrize("raw,masked,counts", [
    ("Contact jane.doe@example.com or call (555) 123-4567 today.",
     "Contact [email] or call [phone] today.", {"[email]": 1, "[phone]": 1}),
    ("A banner: Call 555-123-4567, +44 20 7946 0958 or 555-1234.",
     "A banner: Call [phone], [phone] or [phone].", {"[phone]": 3}),
    ("A UK number 020 7946 0958 on a van; tel. 0612345678.",
     "A UK number [phone] on a van; tel. [phone].", {"[phone]": 2}),
    ("A card 4111 1111 1111 1111 and SSN 123-45-6789 on the desk.",
     "A card [id] and SSN [id] on the desk.", {"[id]": 2}),
    ("His badge number: A1234567 is visible; passport no. X99887766.",
     "His badge number: [id] is visible; passport no. [id].", {"[id]": 2}),
    ("IBAN DE89 3704 0044 0532 0130 00 printed on a letter.", "IBAN [id] printed on a letter.", {"[id]": 1}),
    ("A storefront at 221B Baker Street, London with a P.O. Box 42 sign.",
     "A storefront at [address] with a [address] sign.", {"[address]": 2}),
    ("An envelope to 1600 Pennsylvania Ave NW, Washington, DC 20500.",
     "An envelope to [address].", {"[address]": 1}),
    ("Mail to 42 Elm St., Apt 5, Springfield, IL 62704 on the box.",
     "Mail to [address] on the box.", {"[address]": 1}),
    ("A plaque for Dr. Jane Roe and a name tag reading Tom Lee.",
     "A plaque for Dr. [name] and a name tag reading [name].", {"[name]": 2}),
])
def test_mask_pii(raw, masked, counts):
    out = mask_pii(raw)
    assert out.text == masked and out.counts == counts


@pytest.mark.parametrize("text", [
    "A screen showing 1920 x 1080 pixels, dated 2021-05-13, with 12 people and 3 dogs in 2019.",
    "The Eiffel Tower at night, 330 m tall, photographed at 1/250 s, f/2.8, ISO 3200.",
    "A jersey with the number 23 and a price tag of $1,299.99; a 4-3-3 formation drawn on a board.",
    "Route 66 sign next to a 10-4 sticker and an order number 4111 1111 1111 1112.",  # not Luhn-valid
])
def test_mask_pii_leaves_ordinary_numbers(text):
    assert mask_pii(text).text == text


def test_name_modes():
    text = "A woman named Ada Lovelace stands next to Charles Babbage."
    assert mask_pii(text).text == "A woman named [name] stands next to Charles Babbage."
    assert mask_pii(text, names="off").text == text
    ner = mask_pii(text, names="ner")
    assert ner.text == "A woman named [name] stands next to [name]." and ner.counts == {"[name]": 2}
    with pytest.raises(ValueError):
        mask_pii(text, names="everything")
