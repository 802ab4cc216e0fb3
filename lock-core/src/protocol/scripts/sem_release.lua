-- sem_release: not written yet.
return redis.error_reply('ERR sem_release is not written yet')
