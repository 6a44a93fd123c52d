"""RPC calls to unmodified oslo.messaging servers over one py-amqp connection per broker.

oslo.messaging's client spends about 1.2 ms of CPU per call on this project's fan-out (one
blocking ``call`` per thread, kombu's ``ensure`` and a publisher confirm waited for on every
publish, a reply consumer handing each reply over through a queue); speaking the same wire
format straight through py-amqp from one thread per connection costs about 0.34 ms
(``bench/_lean_floor.py``, docs/performance.md "Conductor CPU per host (issue 12)").

* :mod:`.wire`: the message formats (oslo.messaging's envelope 2.0) and their errors;
* :mod:`.broker`: which transport URLs this path serves, how to connect, buffered reads;
* :mod:`.link`: one connection owned by one thread: confirms, heartbeats, reconnection;
* :mod:`.retry`: when and where a link connects again (back-off, the broker's refusals);
* :mod:`.caller`: calls in flight, reply matching, the call monitor;
* :mod:`.notifier`: notifications as oslo.messaging's ``messagingv2`` driver sends them.
"""
