"""The sizes every Quire API message keeps to, so a client with gRPC's default
settings can read anything Quire stores.

grpc-java, grpc-go, grpc-js and grpcio all refuse an incoming message above
4 MiB (4,194,304 bytes of serialized protobuf) unless told otherwise. Replies
are filled to a little less than that, and the largest entry leaves room for
its own fields and the reply's, so the largest entry always fits one reply.
"""

from __future__ import annotations

# gRPC's default limit on a received message, the same in every language.
DEFAULT_CLIENT_MESSAGE_BYTES = 4 * 1024 * 1024
# The most serialized bytes of one message the gateway sends (a read, tail or
# blob reply): 16 KiB under the default limit.
MAX_REPLY_BYTES = DEFAULT_CLIENT_MESSAGE_BYTES - 16 * 1024
# The largest entry payload the gateway accepts: 64 KiB under the default
# limit, so one entry with its id and length always fits a reply.
MAX_ENTRY_PAYLOAD_BYTES = DEFAULT_CLIENT_MESSAGE_BYTES - 64 * 1024
