import pytest

from cir_core.errors import InputError
from cir_core.inputs import MAX_EDIT_CHARS, check_edit_text


def test_clean_text_passes_collapsed():
    assert check_edit_text("  Make the square\n blue.  ") == "Make the square blue."


@pytest.mark.parametrize("bad", ["", "   ", "\n\t"])
def test_empty_edit_is_one_clear_error(bad):
    with pytest.raises(InputError, match="empty"):
        check_edit_text(bad)


def test_huge_and_non_text_edits_are_refused():
    with pytest.raises(InputError, match="limit"):
        check_edit_text("x" * (MAX_EDIT_CHARS + 1))
    with pytest.raises(InputError, match="text"):
        check_edit_text(None)
