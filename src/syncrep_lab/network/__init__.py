"""Emulated network links: the nodes of a cluster and the client each in their own network
namespace, joined by veth pairs whose delay, jitter, loss and rate are set per link.

From the bottom up: ``links`` holds the link profile and its checks; ``plan`` lays out the
namespaces, veths and addresses (pure); ``commands`` runs ip, tc and iptables, bounded in
time; ``owners`` keeps the owner records of the namespaces made here; ``capabilities`` tries
what the machine allows and picks the backend (``netem``, or the delay line); ``tc`` builds
the qdisc and NFQUEUE rule command lines; ``delayer`` is the userspace NFQUEUE delay line
used when the kernel has no ``netem`` queueing discipline, and ``delayer_handle`` starts and
talks to it; ``processes`` finds and kills the processes inside a namespace; ``shaping``
applies a profile to a link's ends (and changes it while running); ``readback`` reads back
what is applied; ``netns`` makes and removes the namespaces.
"""
