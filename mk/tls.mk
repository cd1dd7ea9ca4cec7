# TLS to Redis goes through stunnel (docs/DEPLOYMENT.md); test_tls runs the
# recipe with a certificate made by openssl.
DEBS += stunnel4 openssl
