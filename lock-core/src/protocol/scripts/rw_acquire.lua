-- rw_acquire: not written yet.
return redis.error_reply('ERR rw_acquire is not written yet')
