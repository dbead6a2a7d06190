"""The registry service: the only process that talks to etcd."""
