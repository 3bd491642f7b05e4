"""Time expressions in questions: what counts, what does not, and the day windows they resolve to."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

import pytest

from memsift.engine.search.time_query import (TimeWindow, find_time_windows, parse_day, time_filter_for, today_window,
                                              without_time_expressions)

# Tuesday 18 April 2023, 02:06 local time.
NOW = datetime(2023, 4, 18, 2, 6).timestamp()
NOW_DAY = date(2023, 4, 18)


def _windows(q: str) -> list[tuple[date | None, date | None]]:
    return [(w.start, w.end) for w in find_time_windows(q, NOW)]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Who did I meet with during the lunch last Tuesday?", [(date(2023, 4, 11), date(2023, 4, 11))]),
        ("what did we decide on Friday?", [(date(2023, 4, 14), date(2023, 4, 14))]),
        ("what did we decide yesterday", [(date(2023, 4, 17), date(2023, 4, 17))]),
        ("what happened the day before yesterday", [(date(2023, 4, 16), date(2023, 4, 16))]),
        ("what was the plan in November 2022?", [(date(2022, 11, 1), date(2022, 11, 30))]),
        ("what did we decide on 8 May?", [(date(2022, 5, 8), date(2022, 5, 8))]),  # the last 8 May before now
        ("notes from May 8th, 2023", [(date(2023, 5, 8), date(2023, 5, 8))]),
        ("the 2023-04-02 deploy", [(date(2023, 4, 2), date(2023, 4, 2))]),
        ("meeting on 2023/03/09", [(date(2023, 3, 9), date(2023, 3, 9))]),
        ("what did I do last week", [(date(2023, 4, 10), date(2023, 4, 16))]),
        ("two weeks ago we talked about it", [(date(2023, 4, 3), date(2023, 4, 9))]),
        ("What charity event did I join a month ago?", [(date(2023, 3, 1), date(2023, 3, 31))]),
        ("3 days ago", [(date(2023, 4, 15), date(2023, 4, 15))]),
        ("in the past few weeks", [(date(2023, 3, 27), date(2023, 4, 18))]),
        ("what happened last year", [(date(2022, 1, 1), date(2022, 12, 31))]),
        ("what changed since March", [(date(2023, 3, 1), None)]),
        ("which laptop did I use before 2022", [(None, date(2021, 12, 31))]),
        ("the plan from 2019", [(date(2019, 1, 1), date(2019, 12, 31))]),
        ("Sepsis mortality has risen from 2009 to 2014.", [(date(2009, 1, 1), date(2014, 12, 31))]),
        ("what did we ship between March and May 2023?", [(date(2023, 3, 1), date(2023, 5, 31))]),
        ("notes from 2023-01-05 to 2023-02-01", [(date(2023, 1, 5), date(2023, 2, 1))]),
        ("2023年5月的计划是什么", [(date(2023, 5, 1), date(2023, 5, 31))]),
        ("两周前我们讨论了什么", [(date(2023, 4, 3), date(2023, 4, 9))]),
        ("上周二开会说了什么", [(date(2023, 4, 11), date(2023, 4, 11))]),
        # Weekdays of a named week (18 April 2023 is a Tuesday): 上周一 is last week's Monday, not
        # the latest one; a weekday alone, the latest before today
        ("上周一开会说了什么", [(date(2023, 4, 10), date(2023, 4, 10))]),
        ("上上周五", [(date(2023, 4, 7), date(2023, 4, 7))]),
        ("这周一", [(date(2023, 4, 17), date(2023, 4, 17))]),
        ("周日我们去了哪里", [(date(2023, 4, 16), date(2023, 4, 16))]),
        ("礼拜三", [(date(2023, 4, 12), date(2023, 4, 12))]),
        ("先週の月曜日", [(date(2023, 4, 10), date(2023, 4, 10))]),
        ("月曜日に何を食べた", [(date(2023, 4, 17), date(2023, 4, 17))]),
        ("大前天", [(date(2023, 4, 15), date(2023, 4, 15))]),  # was read as 前天
        # a year alone (dateparser read "2015年" as 2015 years ago: the year 8)
        ("2015年我做了什么", [(date(2015, 1, 1), date(2015, 12, 31))]),
        ("1918年に何があった", [(date(1918, 1, 1), date(1918, 12, 31))]),
        ("二〇二二年的计划", [(date(2022, 1, 1), date(2022, 12, 31))]),
        ("昨天吃了什么", [(date(2023, 4, 17), date(2023, 4, 17))]),
        ("去年的目标", [(date(2022, 1, 1), date(2022, 12, 31))]),
        ("先月の旅行はどうだった", [(date(2023, 3, 1), date(2023, 3, 31))]),
        ("3日前に何を食べた", [(date(2023, 4, 15), date(2023, 4, 15))]),
        # Calendar phrases (engine/search/time_phrases.py), asked on Tuesday 18 April 2023.
        ("what happened last March", [(date(2023, 3, 1), date(2023, 3, 31))]),
        ("next March", [(date(2024, 3, 1), date(2024, 3, 31))]),
        ("what did we do in Q3", [(date(2022, 7, 1), date(2022, 9, 30))]),  # Q3 has not come yet this year
        ("the third quarter", [(date(2022, 7, 1), date(2022, 9, 30))]),
        ("what happened last summer", [(date(2022, 6, 1), date(2022, 8, 31))]),
        ("in mid-March", [(date(2023, 3, 11), date(2023, 3, 20))]),  # not all of March
        ("early April", [(date(2023, 4, 1), date(2023, 4, 10))]),
        ("late March", [(date(2023, 3, 21), date(2023, 3, 31))]),
        ("over the weekend", [(date(2023, 4, 15), date(2023, 4, 16))]),
        ("earlier this week", [(date(2023, 4, 17), date(2023, 4, 17))]),
        ("earlier this month", [(date(2023, 4, 1), date(2023, 4, 17))]),
        ("a couple of days ago", [(date(2023, 4, 15), date(2023, 4, 17))]),
        ("over the holidays", [(date(2022, 12, 24), date(2023, 1, 1))]),
        ("what did I buy around Christmas?", [(date(2022, 12, 24), date(2023, 1, 1))]),
        ("what did I do this past weekend?", [(date(2023, 4, 15), date(2023, 4, 16))]),
        # The vague times people use (docs/concepts/time.md): each a documented window.
        ("who did I meet the week before last?", [(date(2023, 4, 3), date(2023, 4, 9))]),
        ("what did Lea say the other day?", [(date(2023, 4, 8), date(2023, 4, 16))]),
        ("what did I read recently?", [(date(2023, 3, 19), date(2023, 4, 18))]),
        ("what have I been cooking lately?", [(date(2023, 3, 19), date(2023, 4, 18))]),
        ("what did I cook a while ago?", [(date(2022, 10, 17), date(2023, 4, 4))]),
        ("what did we ship earlier this year?", [(date(2023, 1, 1), date(2023, 4, 17))]),
        ("what did I do earlier today", [(date(2023, 4, 18), date(2023, 4, 18))]),
        ("anything new since Monday?", [(date(2023, 4, 17), None)]),
        ("上周末我们聊了什么", [(date(2023, 4, 15), date(2023, 4, 16))]),
        ("三月中旬", [(date(2023, 3, 11), date(2023, 3, 20))]),
        ("第三季度", [(date(2022, 7, 1), date(2022, 9, 30))]),
        ("去年夏天", [(date(2022, 6, 1), date(2022, 8, 31))]),
        ("前天", [(date(2023, 4, 16), date(2023, 4, 16))]),
        ("一昨日は何をした", [(date(2023, 4, 16), date(2023, 4, 16))]),
        ("先週末", [(date(2023, 4, 15), date(2023, 4, 16))]),
        # The same day back: one day, not the whole of last year (or month, or week).
        ("what did I do on this day last year?", [(date(2022, 4, 18), date(2022, 4, 18))]),
        ("what happened a year ago today", [(date(2022, 4, 18), date(2022, 4, 18))]),
        ("two years ago today", [(date(2021, 4, 18), date(2021, 4, 18))]),
        ("this date a year ago", [(date(2022, 4, 18), date(2022, 4, 18))]),
        ("what did we ship a month ago today?", [(date(2023, 3, 18), date(2023, 3, 18))]),
        ("this day last week", [(date(2023, 4, 11), date(2023, 4, 11))]),
        ("where was I around this time last year?", [(date(2022, 4, 11), date(2022, 4, 25))]),
        ("去年的今天我在做什么", [(date(2022, 4, 18), date(2022, 4, 18))]),
        ("一年前の今日", [(date(2022, 4, 18), date(2022, 4, 18))]),
        ("先月の今日", [(date(2023, 3, 18), date(2023, 3, 18))]),
        # Named days, parts of a year and of a month, weeks and days of a month, halves.
        ("what did I do last Christmas?", [(date(2022, 12, 24), date(2023, 1, 1))]),
        ("what did we do on New Year's Eve?", [(date(2022, 12, 31), date(2022, 12, 31))]),
        ("Christmas Day", [(date(2022, 12, 25), date(2022, 12, 25))]),
        ("new years day", [(date(2023, 1, 1), date(2023, 1, 1))]),
        ("what did we do on New Year\u2019s Eve?", [(date(2022, 12, 31), date(2022, 12, 31))]),  # a phone's ’
        # A day of a named month said with "the" (was read as this month's 1st / 3rd)
        ("what happened on the 1st of November?", [(date(2022, 11, 1), date(2022, 11, 1))]),
        ("on the 3rd of March 2022", [(date(2022, 3, 3), date(2022, 3, 3))]),
        ("on the first of April", [(date(2023, 4, 1), date(2023, 4, 1))]),
        ("what did we do on November the 1st?", [(date(2022, 11, 1), date(2022, 11, 1))]),
        ("the twenty-first of last month", [(date(2023, 3, 21), date(2023, 3, 21))]),
        # Spans said in other words: hours, "back", counts without "the"
        ("anything in the last 48 hours?", [(date(2023, 4, 16), NOW_DAY)]),
        ("three days back", [(date(2023, 4, 15), date(2023, 4, 15))]),
        ("in the last couple of days", [(date(2023, 4, 16), NOW_DAY)]),
        ("last 3 days", [(date(2023, 4, 15), NOW_DAY)]),
        ("two weekends ago", [(date(2023, 4, 8), date(2023, 4, 9))]),
        ("in the past fortnight", [(date(2023, 4, 4), NOW_DAY)]),
        ("what happened Monday morning?", [(date(2023, 4, 17), date(2023, 4, 17))]),
        # Weekdays (18 April 2023 is a Tuesday): said alone at a clause's end or owning something, the
        # latest before today, as "on Monday"; of a named week, that week's day
        ("what did I eat Monday?", [(date(2023, 4, 17), date(2023, 4, 17))]),
        ("did I go to the gym Sunday and Monday?", [(date(2023, 4, 16),) * 2, (date(2023, 4, 17),) * 2]),
        ("who won Sunday's game?", [(date(2023, 4, 16), date(2023, 4, 16))]),
        ("what did Anna say Tuesday, at the standup?", [(date(2023, 4, 11), date(2023, 4, 11))]),
        ("this past Friday", [(date(2023, 4, 14), date(2023, 4, 14))]),
        ("the previous Tuesday", [(date(2023, 4, 11), date(2023, 4, 11))]),
        ("the Monday before last", [(date(2023, 4, 10), date(2023, 4, 10))]),
        ("what did we decide on Monday of last week?", [(date(2023, 4, 10), date(2023, 4, 10))]),
        ("last week's Friday", [(date(2023, 4, 14), date(2023, 4, 14))]),
        ("Wednesday last week", [(date(2023, 4, 12), date(2023, 4, 12))]),
        ("Tuesday the week before last", [(date(2023, 4, 4), date(2023, 4, 4))]),
        ("over this past weekend", [(date(2023, 4, 15), date(2023, 4, 16))]),
        # the week of a day of a month (was nothing, or the day alone)
        ("what happened the week of the ninth?", [(date(2023, 4, 3), date(2023, 4, 9))]),
        ("the week of the 9th of March", [(date(2023, 3, 6), date(2023, 3, 12))]),
        ("the week of the 23rd of last month", [(date(2023, 3, 20), date(2023, 3, 26))]),
        # Beside a holiday's own day (was "before Thanksgiving": every day until then)
        ("what did we do the day before Thanksgiving?", [(date(2022, 11, 23), date(2022, 11, 23))]),
        ("the day after Thanksgiving", [(date(2022, 11, 25), date(2022, 11, 25))]),
        ("the night before Christmas", [(date(2022, 12, 24), date(2022, 12, 24))]),
        ("the week before Easter", [(date(2023, 4, 2), date(2023, 4, 8))]),
        ("the weekend after Easter", [(date(2023, 4, 15), date(2023, 4, 16))]),
        ("the day after New Year's", [(date(2023, 1, 2), date(2023, 1, 2))]),
        ("the day before the Fourth of July 2022", [(date(2022, 7, 3), date(2022, 7, 3))]),
        ("the week after Christmas 2021", [(date(2021, 12, 26), date(2022, 1, 1))]),
        # Other holidays, the latest begun (Easter 2023 was 9 April): its long weekend or its day.
        ("what did we do over Easter?", [(date(2023, 4, 7), date(2023, 4, 10))]),
        ("what did we do at Thanksgiving?", [(date(2022, 11, 24), date(2022, 11, 27))]),
        ("What was the airline that I flew with on Valentine's day?", [(date(2023, 2, 14), date(2023, 2, 14))]),
        ("what did I eat on Valentine\u2019s Day?", [(date(2023, 2, 14), date(2023, 2, 14))]),
        ("what did we do on valentines day?", [(date(2023, 2, 14), date(2023, 2, 14))]),  # no apostrophe
        ("what did I buy on Black Friday?", [(date(2022, 11, 25), date(2022, 11, 25))]),
        ("who came over the Memorial Day weekend?", [(date(2022, 5, 28), date(2022, 5, 30))]),
        ("what happened on Mother's Day", [(date(2022, 5, 8), date(2022, 5, 8))]),
        ("last Halloween", [(date(2022, 10, 31), date(2022, 10, 31))]),
        ("Halloween 2021", [(date(2021, 10, 31), date(2021, 10, 31))]),
        ("what did we do at Christmas 2021?", [(date(2021, 12, 24), date(2022, 1, 1))]),
        ("what did we do on Christmas Eve 2021?", [(date(2021, 12, 24), date(2021, 12, 24))]),
        ("New Year's Day, 2022", [(date(2022, 1, 1), date(2022, 1, 1))]),
        ("what did we decide since Thanksgiving?", [(date(2022, 11, 24), None)]),
        ("Good Friday", [(date(2023, 4, 7), date(2023, 4, 7))]),  # not last Friday
        ("what did we do the weekend of April 1?", [(date(2023, 4, 1), date(2023, 4, 2))]),  # not last weekend
        ("the weekend of the 8th", [(date(2023, 4, 8), date(2023, 4, 9))]),
        ("what changed since the beginning of the month?", [(date(2023, 4, 1), None)]),
        ("christmas eve of 2020", [(date(2020, 12, 24), date(2020, 12, 24))]),
        ("what did we do on 24/12/2022?", [(date(2022, 12, 24), date(2022, 12, 24))]),  # day first: no 24th month
        ("on 03.11.2022", [(date(2022, 11, 3), date(2022, 11, 3))]),  # dotted: day.month.year
        ("over the Fourth of July weekend", [(date(2022, 7, 2), date(2022, 7, 4))]),  # a Monday
        ("the 4th of July weekend 2020", [(date(2020, 7, 4), date(2020, 7, 5))]),  # a Saturday
        ("what changed since the new year?", [(date(2023, 1, 1), None)]),
        ("what did we plan at the start of the year?", [(date(2023, 1, 1), date(2023, 4, 30))]),
        ("at the end of last year", [(date(2022, 9, 1), date(2022, 12, 31))]),
        ("mid-2022", [(date(2022, 5, 1), date(2022, 8, 31))]),
        ("the beginning of last month", [(date(2023, 3, 1), date(2023, 3, 10))]),
        ("the end of this month", [(date(2023, 4, 21), date(2023, 4, 30))]),
        ("the first week of January", [(date(2023, 1, 1), date(2023, 1, 7))]),
        ("the last week of February", [(date(2023, 2, 22), date(2023, 2, 28))]),
        ("the second week of last month", [(date(2023, 3, 8), date(2023, 3, 14))]),
        ("what happened the week of March 3?", [(date(2023, 2, 27), date(2023, 3, 5))]),  # a Friday's week
        ("what did I buy on the 3rd?", [(date(2023, 4, 3), date(2023, 4, 3))]),
        ("on the 30th", [(date(2023, 3, 30), date(2023, 3, 30))]),  # not yet this month: March's
        ("the 3rd of last month", [(date(2023, 3, 3), date(2023, 3, 3))]),
        ("what did we ship in H2?", [(date(2022, 7, 1), date(2022, 12, 31))]),  # this year's has not begun
        ("the first half of last year", [(date(2022, 1, 1), date(2022, 6, 30))]),
        ("a fortnight ago", [(date(2023, 4, 3), date(2023, 4, 9))]),
        ("the weekend before last", [(date(2023, 4, 8), date(2023, 4, 9))]),
        ("the night before last", [(date(2023, 4, 16), date(2023, 4, 16))]),
        ("this past month", [(date(2023, 3, 1), date(2023, 4, 18))]),
        # "the previous week" is last week, whole; "the same time last year" is "this time last year".
        ("what did we decide the previous week?", [(date(2023, 4, 10), date(2023, 4, 16))]),
        ("what did I buy the prior month", [(date(2023, 3, 1), date(2023, 3, 31))]),
        ("where did we travel the preceding year?", [(date(2022, 1, 1), date(2022, 12, 31))]),
        ("since the previous month", [(date(2023, 3, 1), None)]),
        ("what was I doing at the same time last year?", [(date(2022, 4, 11), date(2022, 4, 25))]),
        ("same time a year ago", [(date(2022, 4, 11), date(2022, 4, 25))]),
    ],
)
def test_time_expressions_resolve_to_day_windows(question: str, expected: list) -> None:
    assert _windows(question) == expected


@pytest.mark.parametrize(
    ("asked_on", "question", "day"),
    [
        (date(2028, 2, 29), "what did I do on this day last year?", date(2027, 2, 28)),  # no 29 February then
        (date(2028, 2, 29), "four years ago today", date(2024, 2, 29)),
        (date(2027, 3, 31), "a month ago today", date(2027, 2, 28)),  # February has no 31st
        (date(2027, 1, 1), "this day last month", date(2026, 12, 1)),  # across the year
        (date(2027, 1, 3), "a week ago today", date(2026, 12, 27)),
    ],
)
def test_the_same_day_back_holds_at_month_and_year_ends(asked_on: date, question: str, day: date) -> None:
    noon = datetime(asked_on.year, asked_on.month, asked_on.day, 12).timestamp()
    assert [(w.start, w.end) for w in find_time_windows(question, noon)] == [(day, day)]


@pytest.mark.parametrize(
    "question",
    [
        "upgrade to version 2.10 of the api",
        "Python 3.11 release notes",
        "costs 3.14 dollars",
        "ticket 2023-45 status",
        "build 20230415 failed",
        "PR #2022 review",
        "May I ask which database we picked?",
        "the team may march on",
        "How many weeks ago did I meet up with my aunt?",
        "How many days passed between the two trips?",
        "which database did we pick for the ledger?",
        "order 1234 shipped in 2022.5 units",
        "10.0.0.1 is the gateway",
        "How many days passed between the Sunday mass and the Ash Wednesday service?",
        "Can you recommend a film for tonight?",
        "I was late to the meeting",
        "what did we do while Bob was away?",
        "the other days of the conference",
        "the 3rd attempt failed",
        "at the end of the day we chose Postgres",
        "half of the team left",
        "the start of the project",
        "rename the H1 heading",
        "on the 30th of February",  # no such day: not this month's 30th
        "prior to that we used MySQL",
        "what did we do the weekend of the wedding?",
        "on 31.02.2024",
        "how much faster was I than my previous year's time?",  # "previous" is not read (it cost a dev question)
        "what was the previous weekly total?",
        "what did we agree with the prior owner?",
        "Thanksgiving recipes",  # a holiday's name alone is a topic as often as a time
        "which costume did I pick for Halloween?",
        "my mother's birthday",
        "the Monday standup notes",  # a weekday before a noun names the thing
        "the deadline is Friday",
        "what do I cook every Monday?",
        "plans for Friday",
        "when was Ash Wednesday?",
        "What time do I wake up on Saturday mornings?",  # a habit, not a day
        "do I run on Sunday nights?",
        "thank God it's Friday",
        "Monday?",
        "每周一开会",  # every Monday
        "一周一次",  # once a week
        "周一到周五都上班",  # weekdays
        "毎週月曜日にジムへ行く",
    ],
)
def test_what_is_not_a_time_is_left_alone(question: str) -> None:
    assert find_time_windows(question, NOW) == []


@pytest.mark.parametrize(
    "question, expected",
    [
        # A list of months, weekdays or years after the first: each its own window (only the first
        # was read before: "in March and April" asked about March alone).
        (
            "which airline did I fly with in January and March?",
            [(date(2023, 1, 1), date(2023, 1, 31)), (date(2023, 3, 1), date(2023, 3, 31))],
        ),
        (
            "the novels I finished in January, February or March",
            [
                (date(2023, 1, 1), date(2023, 1, 31)),
                (date(2023, 2, 1), date(2023, 2, 28)),
                (date(2023, 3, 1), date(2023, 3, 31)),
            ],
        ),
        (
            "what did I do in May and June 2022",  # the last month's year is the list's
            [(date(2022, 5, 1), date(2022, 5, 31)), (date(2022, 6, 1), date(2022, 6, 30))],
        ),
        (
            "what did we plan in March 2022 and April?",  # and so is the first's
            [(date(2022, 3, 1), date(2022, 3, 31)), (date(2022, 4, 1), date(2022, 4, 30))],
        ),
        (
            "what happened on Monday and Tuesday",
            [(date(2023, 4, 17), date(2023, 4, 17)), (date(2023, 4, 11), date(2023, 4, 11))],
        ),
        ("trips in 2021 and 2022", [(date(2021, 1, 1), date(2021, 12, 31)), (date(2022, 1, 1), date(2022, 12, 31))]),
        # What follows "and" is not always a time.
        ("trips in March and may I ask why", [(date(2023, 3, 1), date(2023, 3, 31))]),
        ("in March and 3 friends came", [(date(2023, 3, 1), date(2023, 3, 31))]),
    ],
)
def test_a_list_of_times_gives_a_window_each(question: str, expected: list) -> None:
    assert _windows(question) == expected


def test_a_listed_time_leaves_the_question_as_written() -> None:
    question = "which airline did I fly with in January and March?"
    assert without_time_expressions(question, find_time_windows(question, NOW)) == "which airline did I fly with and ?"


def test_relative_expressions_follow_the_searchs_now() -> None:
    later = datetime(2024, 1, 10, 12, 0).timestamp()
    assert [(w.start, w.end) for w in find_time_windows("yesterday", later)] == [(date(2024, 1, 9), date(2024, 1, 9))]


def test_a_window_says_what_it_was_read_from() -> None:
    (w,) = find_time_windows("what was the plan in November 2022?", NOW)
    assert w.describe() == "2022-11-01..2022-11-30 ('in November 2022')"


def test_since_and_until_take_dates_and_phrases() -> None:
    w = time_filter_for("2023-01-05", "last week", NOW)
    assert (w.start, w.end) == (date(2023, 1, 5), date(2023, 4, 16))  # until: the window's last day (Sunday)
    w = time_filter_for("last March", "last March", NOW)  # a calendar phrase, once refused
    assert (w.start, w.end) == (date(2023, 3, 1), date(2023, 3, 31))
    w = time_filter_for("Q1", "the day before yesterday", NOW)
    assert (w.start, w.end) == (date(2023, 1, 1), NOW_DAY - timedelta(days=2))
    w = time_filter_for("Thanksgiving", "Easter", NOW)  # a holiday's name alone, as the value
    assert (w.start, w.end) == (date(2022, 11, 24), date(2023, 4, 10))
    assert time_filter_for(None, "", NOW) is None
    assert parse_day(datetime(2023, 2, 3, 4, 5)) == date(2023, 2, 3)
    # A bound typed in an input method's full-width mode, as a question typed so is read.
    assert parse_day("２０２３-０２-０３") == date(2023, 2, 3)
    assert time_filter_for("２０２３-０１-０５", "２０２３-０２-０３", NOW).end == date(2023, 2, 3)


@pytest.mark.parametrize(
    ("since", "until", "message"),
    [
        ("banana", None, "since 'banana' is not a date"),
        (None, "2023-13-45", "until '2023-13-45' is not a date"),
        ("2023-05-01", "2023-04-01", "since (2023-05-01) is after until (2023-04-01)"),
        # The Python API's numbers and objects: NaN, 1e20 and infinity failed deep in the calendar.
        (float("nan"), None, "since 'nan' is not a date: POSIX seconds go from 0 to 253402300799"),
        (None, 1e20, "is not a date: POSIX seconds go from 0 to 253402300799"),
        (float("inf"), None, "since 'inf' is not a date"),
        (True, None, "since 'True' is not a date"),
        (None, ["2023-01-01"], "is not a date: use YYYY-MM-DD, a date, a datetime, POSIX seconds"),
    ],
)
def test_bad_filters_say_what_is_wrong(since, until, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        time_filter_for(since, until, NOW)


@pytest.mark.parametrize("zone", [None, "Pacific/Kiritimati", "Pacific/Pago_Pago"])
def test_the_open_bounds_scripts_send_leave_the_modification_times_open(zone) -> None:
    """0001-01-01 and 9999-12-31: year 0 once a zone east of UTC is applied, and nanoseconds past 64
    bits; both ended every backend's search in a traceback."""
    w = time_filter_for("0001-01-01", "9999-12-31", NOW, zone=zone)
    assert (w.start, w.end) == (date(1, 1, 1), date(9999, 12, 31))
    assert w.mtime_ns_range() == (-(2**63), 2**63 - 1)
    lo, hi = time_filter_for("2023-01-05", "2023-01-05", NOW, zone=zone).mtime_ns_range()
    assert abs(hi - lo - 86400 * 10**9) < 10**6  # an ordinary day is still its own (to the millisecond)


def test_a_question_without_its_time_expressions():
    from memsift.engine.search.time_query import without_time_expressions

    q = "canary pipeline in October"
    assert without_time_expressions(q, find_time_windows(q, NOW)) == "canary pipeline"
    assert (
        without_time_expressions("yesterday", find_time_windows("yesterday", NOW)) == "yesterday"
    )  # nothing else left


def test_seasons_follow_the_hemisphere() -> None:
    assert [(w.start, w.end) for w in find_time_windows("last summer", NOW, hemisphere="southern")] == [
        (date(2022, 12, 1), date(2023, 2, 28))]
    assert parse_day("last winter", now=NOW, what="since", hemisphere="southern") == date(2022, 6, 1)


@pytest.mark.parametrize(("question", "only_time"), [
    ("what did I do yesterday?", True),
    ("What did we talk about on May 8?", True),
    ("anything new from last week?", True),
    ("Can you give me a recap of yesterday?", True),
    ("上周末我们聊了什么？", True),
    ("先週は何をしましたか", True),
    ("what did I fix yesterday?", False),
    ("what did Helga ask for last week?", False),
    ("昨天的数据库迁移怎么样了", False),
    ("which database did we pick?", False),  # no time at all
])
def test_a_question_names_only_a_time_when_nothing_else_is_asked(question: str, only_time: bool) -> None:
    from memsift.engine.search.time_only import names_only_a_time

    assert names_only_a_time(question, find_time_windows(question, NOW)) is only_time


def test_words_the_memory_holds_everywhere_name_no_topic() -> None:
    from memsift.engine.search.time_only import MAX_COMMON_WORDS, names_only_a_time, topic_words

    q = "What did Priya and Tomas talk about on May 8?"
    windows = find_time_windows(q, NOW)
    assert topic_words(q, windows) == ["priya", "tomas"]
    assert names_only_a_time(q, windows) is False  # nobody asked the memory
    assert names_only_a_time(q, windows, {"priya", "tomas"}.__contains__) is True
    assert names_only_a_time(q, windows, {"priya"}.__contains__) is False
    many = "what did " + " ".join(f"w{i}" for i in range(MAX_COMMON_WORDS + 1)) + " say yesterday"
    assert names_only_a_time(many, find_time_windows(many, NOW), lambda w: True) is False


@pytest.mark.parametrize(("question", "today"), [
    ("what did I do today?", True),
    ("anything new so far today?", True),
    ("what did we talk about tonight?", True),
    ("今天我们聊了什么？", True),
    ("今日は何をしましたか", True),
    ("what did I fix today?", False),  # a topic: today is not read at all
    ("Can you recommend a film for tonight?", False),
    ("I'm at the store today, what did I buy last time?", False),
])
def test_today_is_read_only_when_nothing_else_is_asked(question: str, today: bool) -> None:
    from memsift.engine.config.models import QueryConfig
    from memsift.engine.search.request import SearchRequest

    if re.search(r"(?<!far )\b(?:today|tonight)\b", question):  # the question parser leaves a bare today/tonight alone
        assert find_time_windows(question, NOW) == []
    req = SearchRequest.parse(question, QueryConfig(), max_results=None, min_score=None, mode=None, since=None,
                              until=None, now=NOW)
    day = datetime.fromtimestamp(NOW).date()
    assert req.time_only is today
    assert [(w.start, w.end) for w in req.windows] == ([(day, day)] if today else [])


@pytest.mark.parametrize(("question", "topic"), [
    # a time said in words is no topic: the keyword side looks for the rest
    ("what did we decide about the ledger last October?", "what did we decide about the ledger"),
    # a time said in CJK stays: the run has no word breaks ("五月艾" is a plant, not May) and the
    # question's date is often the text's own ("1992年4月")
    ("五月艾分布在哪些地区？", "五月艾分布在哪些地区？"),
    ("1992年4月，罗保铭担任什么职务？", "1992年4月，罗保铭担任什么职务？"),
])
def test_the_topic_leaves_out_a_time_said_in_words_but_not_one_said_in_cjk(question: str, topic: str) -> None:
    from memsift.engine.config.models import QueryConfig
    from memsift.engine.search.request import SearchRequest
    from memsift.engine.text import compat_form

    req = SearchRequest.parse(question, QueryConfig(), max_results=None, min_score=None, mode=None, since=None,
                              until=None, now=NOW)
    assert req.windows  # each names a time
    assert req.topic.rstrip("? ") == compat_form(topic).rstrip("? ")  # full-width punctuation as ASCII


def test_a_long_since_or_until_is_refused_at_once_without_echoing_it() -> None:
    from memsift.engine.search.time_query import MAX_TIME_VALUE_CHARS

    for value in ("last week " * 9000, "2026-01-01" + "x" * 400_000):
        with pytest.raises(ValueError) as err:
            time_filter_for(value, None, NOW)
        message = str(err.value)
        assert len(message) < 300 and f"{len(value.strip())} characters" in message and message.startswith("since '")
    assert time_filter_for("last week", None, NOW) is not None  # a short phrase still reads
    with pytest.raises(ValueError, match="not a date"):
        parse_day("y" * (MAX_TIME_VALUE_CHARS + 1), now=NOW, what="until")


def test_a_question_names_at_most_a_bounded_number_of_times() -> None:
    from memsift.engine.search.time_query import MAX_WINDOWS

    many = "、".join(f"{m}月{d}日" for m in range(1, 13) for d in range(1, 29))  # 336 different days
    assert len(find_time_windows(many, NOW)) == MAX_WINDOWS
    assert len(find_time_windows("五月" * 2048, NOW)) == 1  # 2,048 before the bound; one month said 2,048 times
    assert len(find_time_windows("what happened on May 3, June 4 or July 5?", NOW)) == 3


def test_the_cli_refuses_a_long_since_in_one_short_line(tmp_path, example_workspace) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(example_workspace), "search", "ledger",
           "--since", "last week " * 9000]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       env={"MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
                            "MEMSIFT_NO_RESIDENT": "1", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "89999 characters" in r.stderr and len(r.stderr) < 600, r.stderr[:800]
    assert "Traceback" not in r.stderr


CALENDAR_PHRASES = [
    "on this day last year", "a month ago today", "this time last year", "the end of last month",
    "early next month", "the first week of January", "the last week of February",
    "the fourth week of last month", "the week of March 31", "the week of February 29", "on the 31st",
    "on the 29th", "the 28th of last month", "in H2", "the first half of the year", "mid-2027",
    "the end of last year", "last Christmas", "this Christmas", "Christmas Eve", "New Year's Eve",
    "since the new year", "a fortnight ago", "the weekend before last", "this past month", "last summer",
    "this winter", "Q1", "last quarter", "late February", "over the holidays", "over Easter", "last Thanksgiving",
    "the Memorial Day weekend", "on Mother's Day", "Halloween 2028", "the Fourth of July weekend",
    "the previous week", "the prior month", "the previous year", "the same time last year",
    "this past Monday", "Friday of last week", "the Sunday before last", "what did I eat Sunday?",
    "the day after Thanksgiving", "the week before Christmas", "the weekend after Easter",
    "the night before New Year's Eve", "the week of the 31st",
    "去年的今天", "先月の今日", "上个月初",
]


def test_every_calendar_phrase_reads_on_every_day_of_a_leap_year_and_the_next() -> None:
    """No day of the calendar (month ends, 29 February, the turn of the year) breaks a phrase: each
    gives one ordered window of whole days."""
    from memsift.engine.search.time_phrases import find_calendar_phrases

    day = date(2027, 12, 1)
    while day < date(2029, 1, 2):
        for phrase in CALENDAR_PHRASES:
            found = find_calendar_phrases(phrase, day)
            assert len(found) == 1 and found[0].start <= found[0].end, (day, phrase, found)
        day += timedelta(days=1)
    leap_week = find_calendar_phrases("the week of February 29", date(2029, 1, 1))[0]  # the latest: 2028's
    assert (leap_week.start, leap_week.end) == (date(2028, 2, 28), date(2028, 3, 5))
    assert find_calendar_phrases("the week of February 30", date(2029, 1, 1)) == []  # no such day: no window
    assert find_calendar_phrases("the 30th of last month", date(2028, 3, 1)) == []


@pytest.mark.parametrize(("zone", "yesterday"), [("UTC0", "2026-12-05"), ("PST8", "2026-12-04"),
                                                  ("CET-1CEST,M3.5.0,M10.5.0/3", "2026-12-05"),
                                                  ("Nowhere/Atlantis", "2026-12-05")])
def test_yesterday_is_a_day_of_the_askers_zone_whatever_form_tz_takes(zone, yesterday):
    """$TZ as POSIX writes it ("PST8": no zone file) or naming no zone file at all (the C library reads it
    as UTC) is a day like any other, never a crash in the date parser's zone lookup."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = ("from memsift.engine.search.time_query import find_time_windows as f; "
            "print(f('what did I do yesterday?', 1796518200.0)[0].start)")  # 2026-12-06 00:50 UTC
    r = subprocess.run([sys.executable, "-c", code], env={"TZ": zone, "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == yesterday, r.stderr[-2000:]


# 2026-12-06 00:50 UTC: still the 5th in California, already the 6th in Tokyo's morning.
_LATE_UTC = 1796518200.0


@pytest.mark.parametrize(("zone", "yesterday"), [("America/Los_Angeles", date(2026, 12, 4)),
                                                  ("Asia/Tokyo", date(2026, 12, 5)), ("UTC", date(2026, 12, 5))])
def test_the_users_zone_names_the_days_whatever_the_machines_zone(zone, yesterday):
    """`query.time.timezone` (or OpenClaw's userTimezone): a gateway in UTC reads a Californian's
    "yesterday" as hers, the day her daily file is named for."""
    [w] = find_time_windows("what did I do yesterday?", _LATE_UTC, zone=zone)
    assert (w.start, w.end, w.zone) == (yesterday, yesterday, zone)
    today = yesterday + timedelta(days=1)
    assert today_window("what did I do today?", _LATE_UTC, zone).start == today
    assert time_filter_for(_LATE_UTC, None, _LATE_UTC, zone=zone).start == today  # POSIX seconds: that zone's day
    [week] = find_time_windows("what did I do last week?", _LATE_UTC, zone=zone)
    assert week.zone == zone and week.start.weekday() == 0


def test_a_windows_modification_times_are_its_zones_days():
    """Undated files are kept by a since/until filter by their modification time: the window's days
    run from midnight to midnight of its zone, whatever this machine's is."""
    lo, hi = TimeWindow(date(2026, 12, 5), date(2026, 12, 5), "x", "America/Los_Angeles").mtime_ns_range()
    assert lo == int(datetime(2026, 12, 5, 8, tzinfo=timezone.utc).timestamp() * 1e9)  # PST is UTC-8
    assert 0 < int(datetime(2026, 12, 6, 8, tzinfo=timezone.utc).timestamp() * 1e9) - hi <= 2000  # 23:59:59.999999
    later_lo, _ = TimeWindow(date(2026, 12, 5), None, "x", "Asia/Tokyo").mtime_ns_range()
    assert later_lo == int(datetime(2026, 12, 4, 15, tzinfo=timezone.utc).timestamp() * 1e9)


def test_an_unknown_zone_is_refused_by_name():
    from memsift.engine.config.zones import BadZone, zone_info

    for bad in ("Mars/Olympus_Mons", "../../etc/passwd", "", "UTC0"):
        with pytest.raises(BadZone, match="no time zone"):
            zone_info(bad)
