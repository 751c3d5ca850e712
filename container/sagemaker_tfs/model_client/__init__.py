"""The model servers as the other parts call them, over HTTP/1.1 keep-alive connections on the loopback interface.

model_servers.py  the instances, their client (errors in the app's terms), context.session, the status API
http_client.py    the HTTP/1.1 client (per-thread keep-alive connections, no locks)
"""
