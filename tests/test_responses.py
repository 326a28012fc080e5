"""What ``berth.web.responses.Reply`` puts on the wire."""

from berth.web.responses import Reply


def _send(reply, method="GET"):
    sent = {}

    def start_response(status, headers):
        sent["status"], sent["headers"] = status, headers

    body = b"".join(reply({"REQUEST_METHOD": method}, start_response))
    return sent["status"], dict(sent["headers"]), body


def test_json_reply_carries_its_type_length_and_extra_headers():
    status, headers, body = _send(Reply(b'{"a":1}', 200, headers={"Location": "http://x/y"}))
    assert status == "200 OK"
    assert headers == {"Content-Type": "application/json", "Content-Length": "7", "Location": "http://x/y"}
    assert body == b'{"a":1}'


def test_no_content_has_neither_type_nor_length():
    status, headers, body = _send(Reply(b"", 204, content_type=None, headers={"vary": "x"}))
    assert (status, headers, body) == ("204 NO CONTENT", {"vary": "x"}, b"")


def test_empty_created_says_its_length_is_zero():
    status, headers, _ = _send(Reply(b"", 201, content_type=None))
    assert status == "201 CREATED" and headers == {"Content-Length": "0"}


def test_head_gets_the_headers_without_the_body():
    status, headers, body = _send(Reply(b"abc", 405), method="HEAD")
    assert status == "405 METHOD NOT ALLOWED" and headers["Content-Length"] == "3" and body == b""


# --- HTTP dates and Location -----------------------------------------------------------------------

import datetime  # noqa: E402
import email.utils  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from berth.web.responses import http_date  # noqa: E402


@given(
    st.datetimes(
        min_value=datetime.datetime(1971, 1, 1),
        max_value=datetime.datetime(9998, 12, 31),
        timezones=st.none()
        | st.just(datetime.UTC)
        | st.builds(
            datetime.timezone,
            st.timedeltas(min_value=datetime.timedelta(hours=-23), max_value=datetime.timedelta(hours=23)),
        ),
    )
)
def test_http_date_writes_what_the_standard_library_writes(moment):
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)
    expected = email.utils.format_datetime(aware.astimezone(datetime.UTC), usegmt=True)
    assert http_date(moment) == expected


def test_http_date_without_moment_is_now():
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    written = email.utils.parsedate_to_datetime(http_date())
    after = datetime.datetime.now(datetime.UTC)
    assert before <= written <= after


def test_location_follows_the_host_each_request_names(api):
    for host in ("placement.example.org", "10.0.0.5:8778", "placement.example.org"):
        r = api.put("/traits/CUSTOM_WHERE", headers={"Host": host})
        assert r.headers["Location"] == f"http://{host}/traits/CUSTOM_WHERE"
    r = api.client.open(
        "/traits/CUSTOM_WHERE",
        method="PUT",
        base_url="https://secure.example.org/placement",
        headers={"X-Auth-Token": "admin", "OpenStack-API-Version": "placement latest"},
    )
    assert r.headers["Location"] == "https://secure.example.org/placement/traits/CUSTOM_WHERE"
