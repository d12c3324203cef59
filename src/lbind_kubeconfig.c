/* lbind_kubeconfig.c - the Lua face of kubeconfig.c: luaop.core.kubeconfig.
 *
 *   kubeconfig.load{kubeconfig =, context =, namespace =, sa_dir =,
 *                   env = {KUBECONFIG =, HOME =, KUBERNETES_SERVICE_HOST =,
 *                          KUBERNETES_SERVICE_PORT =}}
 *     -> config table | nil, err
 *
 * Without `env` the process environment is read. The table carries
 * credentials: it is for the core and its specs, never for operator scripts'
 * sandboxes. */
#include "lbind.h"

#include <stdlib.h>

#include <lauxlib.h>

#include "kubeconfig.h"

static const char *lbind_kc_opt(lua_State *L, int t, const char *key)
{
    const char *s = NULL;
    int type;

    type = lbind_rawfield(L, t, key); /* the string is the table's */

    if (type != LUA_TNIL && type != LUA_TSTRING)
        luaL_error(L, "field %s must be a string", key);
    if (type == LUA_TSTRING)
        s = lua_tostring(L, -1);
    lua_pop(L, 1); /* a string the table holds stays alive */
    return s;
}

static const char *lbind_kc_env(lua_State *L, int envt, const char *name)
{
    return envt ? lbind_kc_opt(L, envt, name) : getenv(name);
}

static void lbind_kc_setstr(lua_State *L, const char *key, const char *v)
{
    if (v) {
        lua_pushstring(L, v);
        lua_setfield(L, -2, key);
    }
}

static void lbind_kc_setbytes(lua_State *L, const char *key, const kubeconfig_bytes *b)
{
    if (b->data) {
        lua_pushlstring(L, (const char *)b->data, b->len);
        lua_setfield(L, -2, key);
    }
}

static void lbind_kc_push(lua_State *L, const kubeconfig *kc)
{
    lua_newtable(L);
    lbind_kc_setstr(L, "source", kc->source);
    lua_pushboolean(L, kc->in_cluster);
    lua_setfield(L, -2, "in_cluster");
    lbind_kc_setstr(L, "context", kc->context);
    lbind_kc_setstr(L, "cluster", kc->cluster_name);
    lbind_kc_setstr(L, "user", kc->user_name);
    lbind_kc_setstr(L, "namespace", kc->namespace);
    lbind_kc_setstr(L, "server", kc->server);
    lbind_kc_setstr(L, "ca_file", kc->ca_file);
    lbind_kc_setbytes(L, "ca_data", &kc->ca_data);
    lua_pushboolean(L, kc->insecure);
    lua_setfield(L, -2, "insecure");
    lbind_kc_setstr(L, "tls_server_name", kc->tls_server_name);
    lbind_kc_setstr(L, "proxy_url", kc->proxy_url);
    lbind_kc_setstr(L, "cert_file", kc->cert_file);
    lbind_kc_setbytes(L, "cert_data", &kc->cert_data);
    lbind_kc_setstr(L, "key_file", kc->key_file);
    lbind_kc_setbytes(L, "key_data", &kc->key_data);
    lbind_kc_setstr(L, "token", kc->token);
    lbind_kc_setstr(L, "token_file", kc->token_file);
    lbind_kc_setstr(L, "username", kc->username);
    lbind_kc_setstr(L, "password", kc->password);
    if (kc->exec) {
        const kubeconfig_exec *ex = kc->exec;
        lua_newtable(L);
        lbind_kc_setstr(L, "api_version", ex->api_version);
        lbind_kc_setstr(L, "command", ex->command);
        lbind_kc_setstr(L, "interactive_mode", ex->interactive_mode);
        lua_pushboolean(L, ex->provide_cluster_info);
        lua_setfield(L, -2, "provide_cluster_info");
        lua_createtable(L, (int)ex->nargs, 0);
        for (size_t i = 0; i < ex->nargs; i++) {
            lua_pushstring(L, ex->args[i]);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_setfield(L, -2, "args");
        lua_createtable(L, 0, (int)ex->nenv);
        for (size_t i = 0; i < ex->nenv; i++) {
            lua_pushstring(L, ex->env[2 * i + 1]);
            lua_setfield(L, -2, ex->env[2 * i]);
        }
        lua_setfield(L, -2, "env");
        lua_setfield(L, -2, "exec");
    }
}

static int lbind_kc_load(lua_State *L)
{
    kubeconfig_opts o = {0};
    kubeconfig *kc;
    char err[600];
    int envt = 0;

    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_newtable(L);
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    if (lbind_rawfield(L, 1, "env") != LUA_TNIL) {
        luaL_checktype(L, 2, LUA_TTABLE);
        envt = 2;
    }
    o.kubeconfig = lbind_kc_opt(L, 1, "kubeconfig");
    o.context = lbind_kc_opt(L, 1, "context");
    o.namespace = lbind_kc_opt(L, 1, "namespace");
    o.sa_dir = lbind_kc_opt(L, 1, "sa_dir");
    o.env_kubeconfig = lbind_kc_env(L, envt, "KUBECONFIG");
    o.home = lbind_kc_env(L, envt, "HOME");
    o.service_host = lbind_kc_env(L, envt, "KUBERNETES_SERVICE_HOST");
    o.service_port = lbind_kc_env(L, envt, "KUBERNETES_SERVICE_PORT");
    if (kubeconfig_load(&o, &kc, err, sizeof err) != 0) {
        luaL_pushfail(L);
        lua_pushstring(L, err);
        return 2;
    }
    lbind_kc_push(L, kc);
    kubeconfig_free(kc);
    return 1;
}

static const luaL_Reg lbind_kc_funcs[] = {
    {"load", lbind_kc_load},
    {NULL, NULL},
};

int lbind_kubeconfig_open(lua_State *L)
{
    luaL_newlib(L, lbind_kc_funcs);
    return 1;
}
