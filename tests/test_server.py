"""How ``berth serve --bind`` is turned into the address the HTTP server listens on."""

import ipaddress

from berth.web.server import listen_address as _address


def test_ip_addresses_pass_through():
    assert _address("127.0.0.1:8778") == ("127.0.0.1", 8778)
    assert _address("[::1]:9000") == ("::1", 9000)
    assert _address("0.0.0.0:80") == ("0.0.0.0", 80)


def test_a_missing_host_means_loopback():
    assert _address(":8778") == ("127.0.0.1", 8778)


def test_a_host_name_is_resolved_to_an_address():
    host, port = _address("localhost:8778")
    assert ipaddress.ip_address(host).is_loopback
    assert port == 8778
