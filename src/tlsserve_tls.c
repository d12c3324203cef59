/* tlsserve_tls.c - the TLS half of the HTTPS server (see tlsserve_tls.h). */
#include "tlsserve_tls.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ec.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static void tlsserve_tls_error(char *err, size_t errlen, const char *what, const char *file)
{
    unsigned long e = ERR_get_error();
    char reason[256] = "";

    if (e)
        ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    snprintf(err, errlen, "%s %s%s%s", what, file, e ? ": " : "", reason);
}

/* ALPN: HTTP/1.1 when the client offers it, nothing otherwise (h2 is
 * never chosen). */
static int tlsserve_tls_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                             unsigned inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    for (unsigned i = 0; i < inlen;) {
        unsigned n = in[i];
        if (i + 1 + n > inlen)
            break;
        if (n == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
            *out = in + i + 1;
            *outlen = (unsigned char)n;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + n;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/* A handshake that failed because the client spoke plain HTTP: Go's
 * answer, written raw, then the rest of what it sent read and dropped, so
 * that closing the socket sends no reset ahead of the answer. */
static void tlsserve_tls_info(const SSL *ssl, int where, int ret)
{
    static const char answer[] = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";
    unsigned long e;
    char drop[4096];
    int fd;

    if ((where & SSL_CB_ACCEPT_EXIT) != SSL_CB_ACCEPT_EXIT || ret > 0)
        return;
    e = ERR_peek_error();
    if (ERR_GET_LIB(e) != ERR_LIB_SSL ||
        (ERR_GET_REASON(e) != SSL_R_HTTP_REQUEST && ERR_GET_REASON(e) != SSL_R_HTTPS_PROXY_REQUEST))
        return;
    fd = SSL_get_fd(ssl); /* (a handshake fails once: once per connection) */
    if (fd < 0)
        return;
    if (send(fd, answer, sizeof answer - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        return;
    for (int i = 0; i < 16 && recv(fd, drop, sizeof drop, MSG_DONTWAIT) > 0; i++)
        ;
    shutdown(fd, SHUT_WR);
}

/* A server SSL_CTX with the pair, TLS 1.2 and 1.3 only, and the
 * certificate's serial; NULL with the reason in err. */
/* A server context without its pair yet: TLS 1.2 and 1.3 only. */
static SSL_CTX *tlsserve_tls_new(const char *what, char *err, size_t errlen)
{
    SSL_CTX *ctx;

    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        tlsserve_tls_error(err, errlen, "cannot make a TLS context for", what);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
    /* TLS 1.2: forward secret AEAD suites only, as Go's defaults */
    SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20");
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_alpn_select_cb(ctx, tlsserve_tls_alpn, NULL);
    SSL_CTX_set_info_callback(ctx, tlsserve_tls_info);
    return ctx;
}

/* The serial of ctx's certificate into serial: 0, or -1 with err. */
static int tlsserve_tls_serial(SSL_CTX *ctx, const char *what, char *serial, size_t serial_len, char *err,
                               size_t errlen)
{
    X509 *x = SSL_CTX_get0_certificate(ctx);
    BIGNUM *bn = x ? ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL) : NULL;
    char *hex = bn ? BN_bn2hex(bn) : NULL;

    BN_free(bn);
    if (hex == NULL) {
        tlsserve_tls_error(err, errlen, "cannot read the serial number of", what);
        return -1;
    }
    for (char *p = hex; *p; p++)
        if (*p >= 'A' && *p <= 'F')
            *p = (char)(*p - 'A' + 'a');
    snprintf(serial, serial_len, "%s", hex);
    OPENSSL_free(hex);
    return 0;
}

SSL_CTX *tlsserve_tls_load(const char *cert, const char *key, char *serial, size_t serial_len, char *err,
                           size_t errlen)
{
    SSL_CTX *ctx = tlsserve_tls_new(cert, err, errlen);

    if (ctx == NULL)
        return NULL;
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        tlsserve_tls_error(err, errlen, "cannot read the certificate", cert);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        unsigned long e = ERR_peek_last_error();
        if (ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH)
            goto mismatch;
        tlsserve_tls_error(err, errlen, "cannot read the key", key);
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
mismatch:
        ERR_clear_error();
        snprintf(err, errlen, "the key %s is not the certificate %s's", key, cert);
        goto fail;
    }
    if (tlsserve_tls_serial(ctx, cert, serial, serial_len, err, errlen) != 0)
        goto fail;
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

SSL_CTX *tlsserve_tls_self_signed(const char *host, char *serial, size_t serial_len, char *err, size_t errlen)
{
    SSL_CTX *ctx = tlsserve_tls_new("a self-signed certificate", err, errlen);
    EVP_PKEY *pkey = NULL;
    X509 *x = NULL;
    X509_NAME *name;
    X509_EXTENSION *san = NULL;
    BIGNUM *bn = BN_new();
    char alt[300];
    int ok = 0;

    if (ctx == NULL) {
        BN_free(bn);
        return NULL;
    }
    snprintf(alt, sizeof alt, "DNS:%s", host);
    pkey = EVP_EC_gen("P-256");
    x = X509_new();
    name = x ? X509_get_subject_name(x) : NULL;
    if (pkey && x && name && bn && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
        BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) && X509_set_version(x, 2) == 1 &&
        X509_gmtime_adj(X509_getm_notBefore(x), -3600) && X509_gmtime_adj(X509_getm_notAfter(x), 365L * 24 * 3600) &&
        X509_set_pubkey(x, pkey) == 1 &&
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)host, -1, -1, 0) == 1 &&
        X509_set_issuer_name(x, name) == 1 &&
        (san = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, alt)) != NULL && X509_add_ext(x, san, -1) == 1 &&
        X509_sign(x, pkey, EVP_sha256()) > 0 && SSL_CTX_use_certificate(ctx, x) == 1 &&
        SSL_CTX_use_PrivateKey(ctx, pkey) == 1)
        ok = tlsserve_tls_serial(ctx, "a self-signed certificate", serial, serial_len, err, errlen) == 0;
    else
        tlsserve_tls_error(err, errlen, "cannot make a self-signed certificate for", host);
    X509_EXTENSION_free(san);
    X509_free(x);
    EVP_PKEY_free(pkey);
    BN_free(bn);
    if (!ok) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

static int tlsserve_tls_same(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int tlsserve_tls_changed(tlsserve_files *f)
{
    struct stat cst, kst;

    if (stat(f->cert, &cst) != 0 || stat(f->key, &kst) != 0)
        return 0; /* mid-replacement, or gone: the old pair serves */
    if (tlsserve_tls_same(&cst, &f->cert_st) && tlsserve_tls_same(&kst, &f->key_st))
        return 0;
    f->cert_st = cst;
    f->key_st = kst;
    return 1;
}
