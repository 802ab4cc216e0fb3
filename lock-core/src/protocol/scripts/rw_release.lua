-- rw_release: not written yet.
return redis.error_reply('ERR rw_release is not written yet')
