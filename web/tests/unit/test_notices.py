"""The notice a decision's reply becomes: a person's own pace is not a quota."""

from __future__ import annotations

import pytest
from signoff_web import texts


@pytest.mark.parametrize("locale", ["en", "fr"])
def test_a_persons_rate_limit_and_a_quota_read_differently(locale: texts.Locale) -> None:
    too_fast = texts.notice("rate_limited", locale, "rate_limited")
    quota = texts.notice("rate_limited", locale, "conversation_quota_exceeded")

    assert too_fast == texts.NOTICES["too_fast"][locale]
    assert quota == texts.NOTICES["rate_limited"][locale]
    assert too_fast != quota
