"""Sentence splitting: abbreviations, decimals, punctuation, whitespace, lists, the world's edits."""
import itertools

import pytest

from cir_core.text import split_sentences

CASES = [
    ("", []),
    ("   \n\t ", []),
    ("Make the square blue.", ["Make the square blue."]),
    ("Make the square blue", ["Make the square blue"]),  # no final period
    ("Make it red. Add a cat.", ["Make it red.", "Add a cat."]),
    ("Make it red. Add a cat", ["Make it red.", "Add a cat"]),
    ("make it red. add a cat.", ["make it red.", "add a cat."]),  # lower case still splits
    ("Is it red? Make it blue! Now.", ["Is it red?", "Make it blue!", "Now."]),
    ("Really?! Yes.", ["Really?!", "Yes."]),
    ("Make it   red.    Add\ta cat.", ["Make it red.", "Add a cat."]),
    ("Make it red.\nAdd a cat.", ["Make it red.", "Add a cat."]),
    ("Make the square\nred and add a cat.", ["Make the square red and add a cat."]),  # wrapped line
    ("Make it red\n\nAdd a cat", ["Make it red", "Add a cat"]),  # blank line is a break
    ("Mr. Smith stands left. Dr. Who sits right.", ["Mr. Smith stands left.", "Dr. Who sits right."]),
    ("Move him to St. Louis. Then paint it.", ["Move him to St. Louis.", "Then paint it."]),
    ("Add shapes, e.g. a star. Then stop.", ["Add shapes, e.g. a star.", "Then stop."]),
    ("Add a shape, i.e. a star, on the left.", ["Add a shape, i.e. a star, on the left."]),
    ("Add a cat, a dog, etc. and keep it.", ["Add a cat, a dog, etc. and keep it."]),
    ("Add a cat, a dog, etc. Then make it red.", ["Add a cat, a dog, etc.", "Then make it red."]),
    ("Make it 3.5 times larger. Then rotate it.", ["Make it 3.5 times larger.", "Then rotate it."]),
    ("Scale by 2. Then rotate.", ["Scale by 2.", "Then rotate."]),
    ("It costs $3.50 now.", ["It costs $3.50 now."]),
    ("Paint it like J. Smith would. Add a cat.", ["Paint it like J. Smith would.", "Add a cat."]),
    ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
    ("Make it red (very red.) Then add a cat.", ["Make it red (very red.)", "Then add a cat."]),
    ("Wait... Then add a cat.", ["Wait...", "Then add a cat."]),
    ("Make it red. . Add a cat.", ["Make it red.", "Add a cat."]),  # stray period dropped
    ("!!!", []),
    ("1. Make it red. 2. Add a cat.", ["Make it red.", "Add a cat."]),
    ("- make it red\n- add a cat\n* move left", ["make it red", "add a cat", "move left"]),
    ("1) make it red\n2) add a cat", ["make it red", "add a cat"]),
    ("The file v2.0 is here.", ["The file v2.0 is here."]),
    ("Make it 5kg. Then stop.", ["Make it 5kg.", "Then stop."]),
    ("Make it red.\r\nAdd a cat.", ["Make it red.", "Add a cat."]),
    ("Compare vs. the old one. Done.", ["Compare vs. the old one.", "Done."]),
    ("Put it at No. 5 on the left.", ["Put it at No. 5 on the left."]),
    ("Add a fig. Then say no. Done.", ["Add a fig.", "Then say no.", "Done."]),
    ("Fly to the U.S. Then land.", ["Fly to the U.S.", "Then land."]),
]


@pytest.mark.parametrize("text,expected", CASES)
def test_cases(text, expected):
    assert split_sentences(text) == expected


def test_one_long_sentence_is_one():
    s = ("Make the big square in the upper left corner a deep shade of blue, move the small red "
         "circle next to it, and put the character, who faces left, on the right side; keep the "
         "background, the lighting and everything else as it is")
    assert split_sentences(s) == [s]


def test_world_sentences_round_trip():
    """The world's long edits are its sentences joined by spaces: splitting gives them back."""
    from cir_core.world import query_stream

    for q in itertools.islice(query_stream(7), 120):
        assert split_sentences(q.text) == list(q.sentences), q.text
