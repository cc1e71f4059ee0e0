"""Emulated network links: the nodes of a cluster and the client each in their own network
namespace, joined by veth pairs whose delay, jitter, loss and rate are set per link.

``links`` holds the link profile and its checks, ``netns`` builds, changes, reads back and
removes the namespaces, and ``delayer`` is the userspace NFQUEUE delayer used when the kernel
has no ``netem`` queueing discipline.
"""
