-- sem_acquire: not written yet.
return redis.error_reply('ERR sem_acquire is not written yet')
