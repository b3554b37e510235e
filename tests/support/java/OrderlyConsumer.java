import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * RocketMQ's own orderly consumer (a push consumer with MessageListenerOrderly, which locks each
 * queue it is allocated with LOCK_BATCH_MQ and consumes it only while the lock is live), as a Java
 * application of a consumer group runs it.
 *
 * <p>java -cp ROCKETMQ_JARS/*:CLASSES OrderlyConsumer NAMESRV TOPIC GROUP TIMEOUT_S prints "STARTED",
 * then one line "MSG logicQueue logicOffset body" per message it consumes, until TIMEOUT_S passed
 * or it is killed; it shuts down (persisting offsets, unlocking its queues) on timeout.
 */
public final class OrderlyConsumer {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], group = args[2];
        long deadline = System.currentTimeMillis() + 1000L * Long.parseLong(args[3]);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("orderly-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
            int queue = context.getMessageQueue().getQueueId();
            synchronized (System.out) {
                for (MessageExt msg : msgs) {
                    System.out.println("MSG " + queue + " " + msg.getQueueOffset() + " " + new String(msg.getBody()));
                }
                System.out.flush();
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();
        synchronized (System.out) {
            System.out.println("STARTED " + consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId());
            System.out.flush();
        }
        while (System.currentTimeMillis() < deadline) {
            TimeUnit.MILLISECONDS.sleep(100);
        }
        consumer.shutdown();
    }
}
