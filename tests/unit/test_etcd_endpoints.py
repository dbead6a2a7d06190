"""The registry's etcd endpoints: names are resolved to addresses (etcd3aio dials
an `ipv4:` target), and the name is kept for checking the server's certificate."""

from quire_registry.store import resolve_endpoints


def test_addresses_pass_through_and_need_no_server_name() -> None:
    assert resolve_endpoints(["127.0.0.1:2379", "10.0.0.7:2379"]) == (["127.0.0.1:2379", "10.0.0.7:2379"], None)


def test_a_name_becomes_its_addresses_and_the_name_dialled() -> None:
    addresses, name = resolve_endpoints(["localhost:2379"])
    assert addresses == ["127.0.0.1:2379"]
    assert name == "localhost"
