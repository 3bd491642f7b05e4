"""Holidays' days: Easter by the computus, the weekday-counted US days, and which year a question means."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from memsift.engine.search.holidays import easter_sunday, holiday_key, holiday_window, nth_weekday
from memsift.engine.search.time_only import names_only_a_time
from memsift.engine.search.time_query import find_time_windows

# Western Easter Sundays as the churches' tables give them (a wrong step of the computus moves
# some of them by a week or a month).
EASTERS = ["1961-04-02", "1974-04-14", "1981-04-19", "1999-04-04", "2000-04-23", "2008-03-23", "2011-04-24",
           "2019-04-21", "2024-03-31", "2025-04-20", "2026-04-05", "2027-03-28", "2038-04-25", "2049-04-18",
           "2285-03-22"]


@pytest.mark.parametrize("day", EASTERS)
def test_easter_is_the_churches_sunday(day: str) -> None:
    sunday = date.fromisoformat(day)
    assert easter_sunday(sunday.year) == sunday and sunday.weekday() == 6


def test_weekday_counted_days() -> None:
    assert nth_weekday(2026, 11, 3, 4) == date(2026, 11, 26)  # Thanksgiving 2026
    assert nth_weekday(2025, 11, 3, 4) == date(2025, 11, 27)
    assert nth_weekday(2026, 5, 0, -1) == date(2026, 5, 25)  # Memorial Day
    assert nth_weekday(2022, 5, 0, -1) == date(2022, 5, 30)  # May 31 a Tuesday
    assert nth_weekday(2026, 12, 0, -1) == date(2026, 12, 28)  # the last month of a year


@pytest.mark.parametrize(("today", "which", "expected"), [
    (date(2026, 12, 7), None, (date(2026, 11, 26), date(2026, 11, 29))),
    (date(2026, 11, 25), None, (date(2025, 11, 27), date(2025, 11, 30))),  # not yet this year's
    (date(2026, 11, 27), None, (date(2026, 11, 26), date(2026, 11, 29))),  # asked during it
    (date(2026, 11, 27), "last", (date(2025, 11, 27), date(2025, 11, 30))),  # "last": one that is over
    (date(2026, 12, 7), "last", (date(2026, 11, 26), date(2026, 11, 29))),
    (date(2026, 1, 5), "this", (date(2026, 11, 26), date(2026, 11, 29))),
])
def test_which_thanksgiving_a_question_means(today: date, which: str | None, expected: tuple[date, date]) -> None:
    assert holiday_window("thanksgiving", which, None, today) == expected


def test_a_one_day_holidays_weekend_is_its_nearest() -> None:
    assert holiday_window("memorial day", None, 2026, date(2026, 12, 1), weekend=True) == (date(2026, 5, 23),
                                                                                           date(2026, 5, 25))
    # 4 July 2024 was a Thursday: Thursday to Sunday; 4 July 2023 a Tuesday: the weekend before
    assert holiday_window("fourth of july", None, 2024, date(2026, 12, 1), weekend=True) == (date(2024, 7, 4),
                                                                                             date(2024, 7, 7))
    assert holiday_window("fourth of july", None, 2023, date(2026, 12, 1), weekend=True) == (date(2023, 7, 1),
                                                                                             date(2023, 7, 4))


def test_a_christmas_of_a_year_that_straddles_it() -> None:
    # asked on 1 January: the holidays that end today, not the coming ones
    assert holiday_window("christmas", None, None, date(2027, 1, 1)) == (date(2026, 12, 24), date(2027, 1, 1))


@pytest.mark.parametrize("name", ["Valentine's Day", "valentines", "St. Patrick's Day", "saint paddy's day",
                                  "Hallowe'en", "the 4th of July", "Fathers day"])
def test_names_as_people_write_them(name: str) -> None:
    assert holiday_key(name) is not None


def test_a_holiday_alone_is_asked_as_a_time_when_nothing_else_is_asked() -> None:
    now = datetime(2026, 12, 7, 12).timestamp()
    for question, only in [("what did we do over Thanksgiving?", True), ("what happened on Halloween?", True),
                           ("which gifts did I buy before Valentine's Day?", False)]:
        windows = find_time_windows(question, now)
        assert windows, question
        assert names_only_a_time(question, windows) is only, question


def test_the_days_beside_a_holidays_own_day() -> None:
    from memsift.engine.search.calendar_spans import beside
    from memsift.engine.search.holidays import holiday_day

    assert holiday_day("thanksgiving", 2026) == date(2026, 11, 26)  # its Thursday, not its long weekend
    assert holiday_day("easter", 2026) == date(2026, 4, 5)
    assert holiday_day("christmas", 2026) == date(2026, 12, 25)
    saturday, sunday = date(2026, 12, 5), date(2026, 12, 6)
    # a weekend beside a weekend day is the next or the previous one, never its own
    assert beside(saturday, "weekend", "after") == (date(2026, 12, 12), date(2026, 12, 13))
    assert beside(sunday, "weekend", "before") == (date(2026, 11, 28), date(2026, 11, 29))
    assert beside(sunday, "weekend", "after") == (date(2026, 12, 12), date(2026, 12, 13))
    assert beside(saturday, "week", "before") == (date(2026, 11, 28), date(2026, 12, 4))
    assert beside(date(2026, 12, 31), "day", "after") == (date(2027, 1, 1), date(2027, 1, 1))
