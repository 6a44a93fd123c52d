"""RPC calls to unmodified oslo.messaging servers over one py-amqp connection per broker.

oslo.messaging's client spends about 1.2 ms of CPU per call on this project's fan-out (one
blocking ``call`` per thread, kombu's ``ensure`` and a publisher confirm waited for on every
publish, a reply consumer handing each reply over through a queue); speaking the same wire
format straight through py-amqp from one thread per connection costs about 0.34 ms
(``bench/_lean_floor.py``, docs/performance.md "Conductor CPU per host (issue 12)").

* :mod:`.wire`: the message format (oslo.messaging's envelope 2.0) and its errors;
* :mod:`.broker`: which transport URLs this path serves and how to connect;
* :mod:`.caller`: the connection's thread, calls in flight, the call monitor, reconnection.
"""
