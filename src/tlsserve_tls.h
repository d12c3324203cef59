/* tlsserve_tls.h - the TLS half of the HTTPS server (tlsserve.c): a
 * server SSL_CTX made from a certificate (chain) file and a key file, and
 * the two files watched for change.
 *
 * The context speaks TLS 1.2 and 1.3 only (TLS 1.2 with forward-secret
 * AEAD suites, as Go's defaults), without renegotiation, compression or a
 * session cache; its ALPN picks http/1.1 when offered and nothing else
 * (never h2). A client that sends plain HTTP fails the handshake; its
 * failure is answered with Go's raw `400 Bad Request` "Client sent an
 * HTTP request to an HTTPS server." (OpenSSL's record layer knows the
 * request: SSL_R_HTTP_REQUEST). */
#ifndef LUAOP_TLSSERVE_TLS_H
#define LUAOP_TLSSERVE_TLS_H

#include <stddef.h>
#include <sys/stat.h>

#include <openssl/ssl.h>

/* The files, and what stat said of them when last looked at. */
typedef struct tlsserve_files {
    const char *cert, *key;
    struct stat cert_st, key_st;
} tlsserve_files;

/* A server context with the pair, and the certificate's serial number in
 * lowercase hex; NULL with the reason in err (a file that does not read,
 * a key that is not the certificate's). */
SSL_CTX *tlsserve_tls_load(const char *cert, const char *key, char *serial, size_t serial_len, char *err,
                           size_t errlen);

/* The same with a certificate made here, signed by its own new key (P-256,
 * a random serial, a year, CN and DNS name host): what controller-runtime's
 * secure metrics server serves when given no files. */
SSL_CTX *tlsserve_tls_self_signed(const char *host, char *serial, size_t serial_len, char *err, size_t errlen);

/* 1 when either file changed (inode, device, size, modification or change
 * time) since the last call, which is then remembered; 0 when not, or when
 * one cannot be read now (mid-replacement). */
int tlsserve_tls_changed(tlsserve_files *f);

#endif
