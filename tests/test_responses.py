"""What ``berth.api.responses.Reply`` puts on the wire."""
from berth.api.responses import Reply


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
